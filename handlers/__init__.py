"""Slack-facing listeners. Each module has `register_listeners(app, …)`, as in Bolt's template."""
