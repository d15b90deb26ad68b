"""Test support, shared by tests and benchmarks: the Slack stand-in, skybot processes, the
test clusters and their locks, records and stores to start from; one module per topic.
Test modules import from here, never from each other, and benchmarks only from here
(tests/test_layering.py). Waiting on something: `cluster.wait_for` in async tests,
`cluster.wait_until` in plain ones; no loop of sleeps of a test's own
(tests/test_wait_helpers.py)."""
