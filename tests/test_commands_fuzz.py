"""Whatever anyone types after `/sky`, dispatch() answers within Slack's limits and never raises.

The strategies lean towards text that reaches the commands (a real subcommand name followed by
junk) rather than only random words the router turns away at the door.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.view import ClusterView
from handlers.commands import command_table
from handlers.reply import MAX_BLOCKS, MAX_SECTION_CHARS, Reply
from tests.support.asking import answer_from_view
from tests.support.factories import make_snapshot, make_view
from tests.support.sample_cluster import NOW, cluster

TABLE = command_table()
NAMES = [c.name for c in TABLE.all()]
VIEWS = [cluster(), make_view(make_snapshot(None))]

awkward = st.sampled_from(
    ['"', "'", "`", "\\", "--here", "#", "_", "<!channel>", "&", "\n", "\x00", "١٢٣", "🚀", "-"]
)
word = st.one_of(
    st.text(max_size=30),
    awkward,
    st.sampled_from(["hoffman-lab", "HOFFMAN-LAB", "alice", "a40", "103", "300_4", "0", "9" * 30]),
    st.integers(min_value=-5, max_value=10**15).map(str),
)
# Up to 40,000 characters: about the most Slack passes in one slash command.
huge = st.builds(lambda s, n: s * n, st.text(min_size=1, max_size=8), st.integers(1, 5_000))
command_text = st.one_of(
    st.text(),
    huge,
    st.builds(
        lambda name, words, sep: name + sep + sep.join(words),
        st.sampled_from(NAMES),
        st.lists(word, max_size=4),
        st.sampled_from([" ", "  ", "\t"]),
    ),
    st.builds(lambda name, tail: f"{name} {tail}", st.sampled_from(NAMES), huge),
)


def check(reply: Reply) -> None:
    assert isinstance(reply, Reply)
    assert reply.text.strip()
    assert 0 < len(reply.blocks) <= MAX_BLOCKS
    for block in reply.blocks:
        items = [block["text"]] if "text" in block else block.get("elements", [])
        assert all(len(item["text"]) <= MAX_SECTION_CHARS for item in items)
    # A crash inside a command would be caught by dispatch() and apologised for: that is a bug.
    assert "internal error" not in reply.text


@settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    text=command_text,
    view=st.sampled_from(VIEWS),
    cluster_user=st.one_of(st.none(), st.sampled_from(["alice", "carol", "nobody"]), st.text()),
)
def test_any_text_gets_a_bounded_answer(
    text: str, view: ClusterView, cluster_user: str | None
) -> None:
    reply = answer_from_view(
        TABLE, view, text, team_id="T1", user_id="U1", cluster_user=cluster_user, now=NOW
    )
    check(reply)
