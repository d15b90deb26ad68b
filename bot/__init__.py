"""skybot: process wiring (config, Bolt app, CLI, console, doctor, install, metrics)."""

__version__ = "0.1.0"
