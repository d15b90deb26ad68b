"""Sign HTTP-mode requests exactly as Slack does, so tests hit the bot's real verifier.

Scheme v0: ``v0=hex(HMAC-SHA256(secret, f"v0:{timestamp}:{body}"))`` in X-Slack-Signature with
the Unix timestamp in X-Slack-Request-Timestamp (slack_sdk.signature.SignatureVerifier checks
the same thing and rejects timestamps more than five minutes away).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from .payloads import slash_command_payload

FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"


def compute_signature(signing_secret: str, timestamp: int | str, body: str) -> str:
    """The X-Slack-Signature value for ``body`` sent at ``timestamp``."""
    base = f"v0:{timestamp}:{body}".encode()
    digest = hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()
    return f"v0={digest}"


def signed_headers(
    signing_secret: str,
    body: str,
    *,
    timestamp: int | None = None,
    age_seconds: int = 0,
    content_type: str = FORM_CONTENT_TYPE,
) -> dict[str, str]:
    """Headers for ``body``; ``age_seconds`` backdates the timestamp to test replay protection."""
    ts = int(time.time()) - age_seconds if timestamp is None else timestamp
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": compute_signature(signing_secret, ts, body),
    }


@dataclass(frozen=True)
class SignedRequest:
    """A ready-to-POST request: ``session.post(url, data=req.body, headers=req.headers)``."""

    body: str
    headers: dict[str, str]
    payload: dict[str, str]


def signed_slash_command(
    signing_secret: str,
    *,
    command: str,
    text: str = "",
    user_id: str = "U1",
    channel_id: str = "C1",
    team_id: str = "T1",
    response_url: str = "https://hooks.slack.com/commands/T1/1/standin",
    user_name: str | None = None,
    channel_name: str = "general",
    team_domain: str = "skytest",
    api_app_id: str = "A0STANDIN",
    wrong_secret: bool = False,
    age_seconds: int = 0,
    timestamp: int | None = None,
    **extra: Any,
) -> SignedRequest:
    """A slash-command form body and its signature headers.

    ``wrong_secret`` signs with a different secret and ``age_seconds`` (e.g. 600) makes the
    timestamp stale, so tests can prove the bot rejects both.
    """
    payload = slash_command_payload(
        command=command,
        text=text,
        user_id=user_id,
        user_name=user_name or user_id.lower(),
        channel_id=channel_id,
        channel_name=channel_name,
        team_id=team_id,
        team_domain=team_domain,
        api_app_id=api_app_id,
        response_url=response_url,
        **extra,
    )
    body = urlencode(payload)
    secret = signing_secret + "-not-the-real-one" if wrong_secret else signing_secret
    headers = signed_headers(secret, body, timestamp=timestamp, age_seconds=age_seconds)
    return SignedRequest(body=body, headers=headers, payload=payload)


def signed_block_action(
    signing_secret: str, payload: dict[str, Any], *, wrong_secret: bool = False
) -> SignedRequest:
    """A button click as Slack POSTs it in HTTP mode: the JSON in a form field `payload`."""
    body = urlencode({"payload": json.dumps(payload)})
    secret = signing_secret + "-not-the-real-one" if wrong_secret else signing_secret
    return SignedRequest(body=body, headers=signed_headers(secret, body), payload=payload)
