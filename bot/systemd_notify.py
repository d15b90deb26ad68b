"""Telling systemd how the service is (`Type=notify`, `WatchdogSec=`), per sd_notify(3).

The protocol is one datagram of text to the AF_UNIX socket in $NOTIFY_SOCKET (a leading "@"
means Linux's abstract namespace); outside systemd there is no socket and nothing is sent.
These few lines replace a C-extension dependency (python-systemd) for one sendto.
"""

from __future__ import annotations

import os
import socket


def notify(state: str) -> bool:
    """Send e.g. "READY=1"; False if not run by systemd (or the socket is gone)."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(state.encode(), address)
    except OSError:
        return False
    return True


def watchdog_enabled() -> bool:
    """WatchdogSec= is set for this very process (systemd.exec(5): WATCHDOG_USEC/_PID)."""
    if not os.environ.get("WATCHDOG_USEC", "").isdigit():
        return False
    pid = os.environ.get("WATCHDOG_PID", "")
    return not pid or pid == str(os.getpid())
