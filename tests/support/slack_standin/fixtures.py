"""A pytest fixture, for a conftest to re-export:
``from tests.support.slack_standin import slack_standin``.

Function-scoped on purpose: each test gets a fresh server, so recorded calls and injected
faults never leak between tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .server import SlackStandIn


@pytest.fixture
async def slack_standin() -> AsyncIterator[SlackStandIn]:
    async with SlackStandIn() as slack:
        yield slack
