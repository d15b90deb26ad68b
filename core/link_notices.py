"""What the Slack accounts already linked to a cluster account are told when another links to it.

A link lets skybot act as the cluster account and sends it the account's job DMs (log tails
included), so nobody may gain one unseen: the earlier accounts hear of it at once, from the
outbox, in the transaction that makes the link.
"""

from __future__ import annotations

from core.slack_text import literal

HOW = {"proven": "proved it with a link code in its home directory", "email": "matched by email"}


def new_link_notice(cluster_user: str, new_user_id: str, source: str, *, replaced: bool) -> str:
    """The DM to a Slack account already linked to `cluster_user` when `new_user_id` links to it
    (`source`: how the new link was made); `replaced`: the earlier link ends with it."""
    account = literal(cluster_user)
    who = f"<@{new_user_id}>"
    how = HOW.get(source, "linked another way")
    relink = literal(f"/sky link {cluster_user}")
    if replaced:
        return (
            f"Your Slack account is no longer linked to the cluster account {account}: {who} "
            f"has just been linked to it ({how}), and this skybot gives each cluster account "
            f"one Slack account. skybot now acts as {account} and sends its job messages for "
            f"{who} only. If that was not you, someone else can write to {account}'s home "
            f"directory: tell the cluster admins, and link your account again with {relink}."
        )
    return (
        f"{who} has just been linked to your cluster account {account} too ({how}): skybot "
        f"acts as {account} for it and sends it {account}'s job messages, as it does for you. "
        "If that was not you, someone else can write to your home directory: tell the cluster "
        f"admins at once."
    )
