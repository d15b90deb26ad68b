"""The Slack app manifest, rendered from the shipped one for a site's configuration: only the
scopes that configuration uses (bot/scopes.py), and the request URLs of HTTP mode."""

from __future__ import annotations

import re

from bot.scopes import scopes_needed
from core.config_schema import Config

# The shipped manifest's bot scopes: `    bot:` and one `      - SCOPE` line each.
BOT_SCOPES_LIST = re.compile(r"^(?P<head>    bot:\n)(?:      - \S+\n)+", re.M)


def manifest_for(manifest: str, config: Config) -> str:
    """The manifest asking for exactly the scopes `config` needs."""
    scopes = "".join(f"      - {scope}\n" for scope in sorted(scopes_needed(config)))
    text, count = BOT_SCOPES_LIST.subn(lambda m: m["head"] + scopes, manifest)
    if count != 1:
        raise ValueError("the shipped manifest does not list its bot scopes where expected")
    return text


# In the shipped manifest, each request URL HTTP mode needs is a comment `# http: KEY: URL`
# where the key belongs (the slash command, interactivity, event subscriptions).
HTTP_URL_LINE = re.compile(r"^(?P<indent>[ ]*)# http: (?P<key>url|request_url): URL$", re.M)
SLACK_EVENTS_URL = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~/-]*)?")


def http_manifest(manifest: str, url: str) -> str:
    """The Slack app manifest for HTTP mode (`slack.mode = "http"`): Socket Mode off, and
    the slash command, button clicks and events all sent to `url` (skybot's /slack/events)."""
    if not SLACK_EVENTS_URL.fullmatch(url):
        raise ValueError(
            f"{url!r} is not an https URL Slack can send to (https://HOST/slack/events)"
        )
    text, count = HTTP_URL_LINE.subn(lambda m: f"{m['indent']}{m['key']}: {url}", manifest)
    text, switched = re.subn(r"^(\s*socket_mode_enabled:) true$", r"\1 false", text, flags=re.M)
    if count != 3 or switched != 1:
        raise ValueError("the shipped manifest does not have its HTTP settings marked")
    return text
