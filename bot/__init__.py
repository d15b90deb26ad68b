"""skybot: process wiring (config, Bolt app, CLI, console, doctor, install, metrics)."""

from importlib import import_module

try:
    # Written by every build, wheel or editable, from git (pyproject's [tool.versioningit]).
    __version__: str = import_module("bot._version").__version__
except ImportError:  # a source tree that was never built, e.g. a fresh git worktree
    __version__ = "0.0.0+unbuilt"
