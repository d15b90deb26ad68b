"""Test support, shared by tests and benchmarks: the Slack stand-in, skybot processes, the
test clusters and their locks, records and stores to start from. Waiting on something:
`cluster.wait_for` in async tests, `cluster.wait_until` in plain ones."""
