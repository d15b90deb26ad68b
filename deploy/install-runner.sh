#!/usr/bin/env bash
# Install the runner and its sudoers rule from THIS checkout (development and tests); a site
# installs them from the installed package with `skybot install runner sudoers` instead.
# Run as root; safe to run again. PYTHON (default /usr/bin/python3) is the runner's interpreter:
#
#   deploy/install-runner.sh
#   PYTHON=/usr/bin/python3.11 deploy/install-runner.sh
#
# `skybot install` (bot/install.py) checks the interpreter, writes skybot's version into the
# runner, and validates the sudoers file with `visudo -cf` before it moves it into place.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHONPATH="$repo" exec python3 -m bot.cli install runner sudoers --python "${PYTHON:-/usr/bin/python3}"
