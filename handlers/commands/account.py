"""`/sky link USER`, `/sky link check`, `/sky whoami`, `/sky unlink`: tying Slack to the cluster.

A link is proven, not claimed: skybot hands out a one-time code, the user writes it into
~/.config/skybot/link on the cluster, and the runner, running as that user through sudo,
reads it back. Only that user (or root) can write there.
"""

from __future__ import annotations

from datetime import datetime

from core.runner_contract import verify_link_request
from core.runner_replies import Refused, decode_link
from core.slack_text import fenced_code, literal
from core.user_names import cluster_user_name
from handlers.identity import LinkRefused, is_human_account
from handlers.reply import Reply, simple
from handlers.router import Command, CommandRequest, UsageError
from handlers.services import Services

LINK_FILE = "~/.config/skybot/link"
# The runner lists everyone else who can write on the way to the link file: show it whole.
MAX_REFUSAL_CHARS = 1500
SOURCE_WORDS = {
    "admin": "set by the cluster admins",
    "proven": "proven with a link code",
    "email": "matched by your Slack email",
}


async def link(request: CommandRequest, services: Services) -> Reply:
    if len(request.args) != 1:
        raise UsageError("Usage: `/sky link YOUR_CLUSTER_USER`, then `/sky link check`.")
    arg = request.args[0]
    if arg.lower() in ("check", "verify"):
        return await _check(request, services)
    user = cluster_user_name(arg)
    if user is None or not is_human_account(user):
        raise UsageError(
            f"There is no cluster account {literal(arg, 40)} that skybot can act for. "
            "Give your login name on the cluster (what `whoami` prints there)."
        )
    code = await services.identity.start_link(request.team_id, request.user_id, user)
    minutes = services.config.identity.link_code_minutes
    text = (
        f"To prove you are {literal(user)} on the cluster, run this on a login node within "
        f"{minutes} minutes:\n"
        f"```{fenced_code(f'mkdir -p ~/.config/skybot && echo {code.code} > {LINK_FILE}')}```\n"
        "then type `/sky link check`. (Only you can write into your home directory, so the "
        "code there shows the account is yours.)"
    )
    return simple(text)


async def _check(request: CommandRequest, services: Services) -> Reply:
    pending = await services.identity.pending_code(request.team_id, request.user_id)
    if pending is None:
        raise UsageError(
            "You have no link in progress (codes expire). Start with `/sky link YOUR_CLUSTER_USER`."
        )
    user = pending.cluster_user
    reply = decode_link(await services.runner(user, verify_link_request(pending.code)))
    if isinstance(reply, Refused):  # an answer, not a UsageError: the runner did run
        return simple(_refusal(reply, user))
    try:
        told = await services.identity.confirm_link(request.team_id, request.user_id, user)
    except LinkRefused as refusal:
        return simple(f"Not linked: {refusal}")
    text = f"Linked: you are {literal(user)} on the cluster."
    if told:
        others = ", ".join(f"<@{user_id}>" for _, user_id in told)
        if services.config.identity.several_slack_accounts:
            text += f" It is linked to {others} too, who has been told."
        else:
            text += f" It was linked to {others}, who has been told and is linked no longer."
    return simple(f"{text} You can delete {LINK_FILE} now. `/sky unlink` undoes this.")


def _refusal(refused: Refused, user: str) -> str:
    """Why the runner did not take the code, with the commands that fix it when it has them
    (a link file or directory others could write: those make it private)."""
    error = literal(refused.reason, MAX_REFUSAL_CHARS)
    fixes = refused.fix
    if fixes:
        return (
            f"Not linked: {error}\nTo make it yours alone, run this on a login node as "
            f"{literal(user)}, then `/sky link check` again:\n"
            f"```{fenced_code(chr(10).join(fixes))}```"
        )
    return (
        f"Not linked: {error} Check that {LINK_FILE} in {literal(user)}'s home holds exactly "
        "the code."
    )


async def whoami(request: CommandRequest, services: Services) -> Reply:
    if request.args:
        raise UsageError("`/sky whoami` takes no arguments.")
    identity = services.identity.lookup(request.team_id, request.user_id)
    if identity is None and request.cluster_user:
        return simple(f"You are {literal(request.cluster_user)} on the cluster.")
    if identity is None:
        return simple(
            "skybot does not know your cluster account yet. Link it with "
            "`/sky link YOUR_CLUSTER_USER`."
        )
    since = (
        f", since {datetime.fromtimestamp(identity.linked_at):%Y-%m-%d}"
        if identity.linked_at
        else ""
    )
    return simple(
        f"You are {literal(identity.cluster_user)} on the cluster "
        f"({SOURCE_WORDS.get(identity.source, identity.source)}{since})."
    )


async def unlink(request: CommandRequest, services: Services) -> Reply:
    if request.args:
        raise UsageError("`/sky unlink` takes no arguments.")
    if services.identity.is_admin_link(request.team_id, request.user_id):
        return simple(
            "Your link is set by the cluster admins in skybot's configuration; ask them to "
            "change it."
        )
    if await services.identity.unlink(request.team_id, request.user_id):
        return simple("Unlinked. skybot no longer acts for you on the cluster.")
    return simple("You were not linked, so there was nothing to undo.")


LINK = Command(
    "link",
    "link USER | link check",
    "prove which cluster account is yours, so skybot can act for you",
    act=link,
    starts_runner=True,
    private=True,
    about_cluster=False,
)
WHOAMI = Command(
    "whoami",
    "whoami",
    "which cluster account skybot thinks is yours",
    act=whoami,
    private=True,
    about_cluster=False,
)
UNLINK = Command(
    "unlink",
    "unlink",
    "forget the link between your Slack and cluster",
    act=unlink,
    private=True,
    about_cluster=False,
)
