"""Web API method implementations: just enough state to answer like Slack does.

Each handler takes the merged request params and returns the success body; a ``SlackError``
becomes ``{"ok": false, "error": ...}`` with HTTP 200, which is how Slack reports API errors.
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from collections.abc import Callable
from typing import Any

from .records import UploadedFile
from .views import TRIGGER_SECONDS, OpenModal, ViewError, check_modal, stored_view, trigger_age
from .workspace import SlackUser, Workspace

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class SlackError(Exception):
    """An API-level failure (``ok: false``) with Slack's error code."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


def _decode_json(value: Any) -> Any:
    """Form-encoded requests carry blocks/views/files as JSON strings; JSON requests don't."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise SlackError("invalid_arguments") from exc
    return value


class WebApi:
    """State behind the Web API: messages, DMs, home tabs, files."""

    def __init__(self, workspace: Workspace) -> None:
        self.ws = workspace
        self.upload_url_base = ""  # set once the server knows its port
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.ephemeral: list[dict[str, Any]] = []
        self.home_views: dict[str, dict[str, Any]] = {}
        self.files: dict[str, UploadedFile] = {}
        self.dm_channels: dict[str, str] = {}
        # Modals opened with views.open, by view id, oldest first.
        self.modals: dict[str, OpenModal] = {}
        self._seq = itertools.count(1)
        self.handlers: dict[str, Handler] = {
            "auth.test": self.auth_test,
            "chat.postMessage": self.chat_post_message,
            "chat.postEphemeral": self.chat_post_ephemeral,
            "chat.update": self.chat_update,
            "conversations.open": self.conversations_open,
            "conversations.history": self.conversations_history,
            "conversations.info": self.conversations_info,
            "conversations.list": self.conversations_list,
            "users.info": self.users_info,
            "users.lookupByEmail": self.users_lookup_by_email,
            "views.publish": self.views_publish,
            "views.open": self.views_open,
            "files.getUploadURLExternal": self.files_get_upload_url_external,
            "files.completeUploadExternal": self.files_complete_upload_external,
        }

    # -- helpers -------------------------------------------------------------------------------

    def _ts(self) -> str:
        """Unique, increasing message timestamps like "1700000000.000123"."""
        return f"{int(time.time())}.{next(self._seq):06d}"

    def _id(self, prefix: str) -> str:
        return f"{prefix}{secrets.token_hex(5).upper()}"

    def _known_user(self, user_id: str) -> SlackUser:
        user = self.ws.users.get(user_id)
        if user is None:
            raise SlackError("user_not_found")
        return user

    def dm_channel_for(self, user_id: str) -> str:
        """One stable D… channel per user, as conversations.open returns."""
        if user_id not in self.dm_channels:
            self.dm_channels[user_id] = f"D{user_id.lstrip('UW')}{len(self.dm_channels):03d}"
        return self.dm_channels[user_id]

    def _resolve_channel(self, params: dict[str, Any]) -> str:
        channel = str(params.get("channel") or "")
        if not channel:
            raise SlackError("channel_not_found")
        if channel[0] in "UW":  # posting to a user id lands in the app's DM with them
            return self.dm_channel_for(self._known_user(channel).id)
        return channel

    def _message_body(self, params: dict[str, Any], ts: str) -> dict[str, Any]:
        text = params.get("text")
        blocks = _decode_json(params["blocks"]) if params.get("blocks") else None
        attachments = _decode_json(params["attachments"]) if params.get("attachments") else None
        if not text and not blocks and not attachments:
            raise SlackError("no_text")
        message: dict[str, Any] = {
            "type": "message",
            "text": text or "",
            "user": self.ws.bot_user_id,
            "bot_id": self.ws.bot_id,
            "app_id": self.ws.app_id,
            "team": self.ws.team_id,
            "ts": ts,
        }
        if blocks is not None:
            message["blocks"] = blocks
        if attachments is not None:
            message["attachments"] = attachments
        if params.get("thread_ts"):
            message["thread_ts"] = str(params["thread_ts"])
        metadata = _decode_json(params["metadata"]) if params.get("metadata") else None
        if metadata is not None:
            if not isinstance(metadata, dict) or not metadata.get("event_type"):
                raise SlackError("invalid_metadata_format")
            message["metadata"] = metadata
        return message

    # -- methods -------------------------------------------------------------------------------

    def auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": f"https://{self.ws.team_domain}.slack.com/",
            "team": self.ws.team_name,
            "user": "skybot",
            "team_id": self.ws.team_id,
            "user_id": self.ws.bot_user_id,
            "bot_id": self.ws.bot_id,
            "is_enterprise_install": False,
        }

    def chat_post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(params)
        ts = self._ts()
        message = self._message_body(params, ts)
        self.messages[(channel, ts)] = message
        return {"channel": channel, "ts": ts, "message": message}

    def chat_post_ephemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(params)
        user = self._known_user(str(params.get("user") or ""))
        ts = self._ts()
        message = self._message_body(params, ts)
        self.ephemeral.append({"channel": channel, "user": user.id, "message": message})
        return {"message_ts": ts}

    def chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._resolve_channel(params)
        ts = str(params.get("ts") or "")
        if (channel, ts) not in self.messages:
            raise SlackError("message_not_found")
        message = self._message_body(params, ts)
        message["edited"] = {"user": self.ws.bot_user_id, "ts": self._ts()}
        self.messages[(channel, ts)] = message
        return {"channel": channel, "ts": ts, "text": message["text"], "message": message}

    def conversations_open(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("channel"):
            return {"no_op": True, "already_open": True, "channel": {"id": params["channel"]}}
        user_ids = [u for u in str(params.get("users") or "").split(",") if u]
        if not user_ids:
            raise SlackError("users_list_not_supplied")
        users = [self._known_user(u) for u in user_ids]
        if any(u.deleted for u in users):
            raise SlackError("user_disabled")
        if len(users) > 1:
            return {"no_op": False, "already_open": False, "channel": {"id": self._id("G")}}
        already = users[0].id in self.dm_channels
        channel_id = self.dm_channel_for(users[0].id)
        return {"no_op": already, "already_open": already, "channel": {"id": channel_id}}

    def conversations_history(self, params: dict[str, Any]) -> dict[str, Any]:
        """A channel's messages, newest first, `oldest` < ts (Slack: exclusive unless
        `inclusive`); metadata only with include_all_metadata; one page of `limit`."""
        channel = str(params.get("channel") or "")
        if channel not in self.dm_channels.values() and channel not in self.ws.channels:
            raise SlackError("channel_not_found")
        oldest = float(params.get("oldest") or 0)
        with_metadata = str(params.get("include_all_metadata", "")).lower() in ("true", "1")
        found = sorted(
            (
                (ts, message)
                for (where, ts), message in self.messages.items()
                if where == channel and float(ts) > oldest
            ),
            key=lambda item: float(item[0]),
            reverse=True,
        )
        limit = int(params.get("limit") or 100)
        start = int(params.get("cursor") or 0)
        page = [
            message if with_metadata else {k: v for k, v in message.items() if k != "metadata"}
            for _, message in found[start : start + limit]
        ]
        more = start + limit < len(found)
        return {
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self.ws.channels.get(str(params.get("channel") or ""))
        # A private channel the bot is not in does not exist as far as the bot can tell.
        if channel is None or (channel.is_private and not channel.bot_is_member):
            raise SlackError("channel_not_found")
        return {"channel": channel.to_api()}

    def conversations_list(self, params: dict[str, Any]) -> dict[str, Any]:
        """One page holds every channel (no cursor); private ones only if the bot is in them."""
        types = str(params.get("types") or "public_channel").split(",")
        archived_too = str(params.get("exclude_archived", "false")).lower() not in ("true", "1")
        listed = [
            channel.to_api()
            for channel in self.ws.channels.values()
            if ("private_channel" if channel.is_private else "public_channel") in types
            and (channel.bot_is_member or not channel.is_private)
            and (archived_too or not channel.is_archived)
        ]
        return {"channels": listed, "response_metadata": {"next_cursor": ""}}

    def users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = self._known_user(str(params.get("user") or ""))
        return {"user": user.to_api(self.ws.team_id)}

    def users_lookup_by_email(self, params: dict[str, Any]) -> dict[str, Any]:
        user = self.ws.user_by_email(str(params.get("email") or ""))
        if user is None:
            raise SlackError("users_not_found")
        return {"user": user.to_api(self.ws.team_id)}

    def views_publish(self, params: dict[str, Any]) -> dict[str, Any]:
        user = self._known_user(str(params.get("user_id") or ""))
        view = _decode_json(params.get("view"))
        if not isinstance(view, dict) or view.get("type") != "home":
            raise SlackError("invalid_arguments")
        published = {
            "id": self._id("V"),
            "team_id": self.ws.team_id,
            "type": "home",
            "blocks": view.get("blocks", []),
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "hash": secrets.token_hex(8),
            "app_id": self.ws.app_id,
            "bot_id": self.ws.bot_id,
        }
        self.home_views[user.id] = published
        return {"view": published}

    def views_open(self, params: dict[str, Any]) -> dict[str, Any]:
        """A modal, opened with a trigger id at most 3 s old (ours carry whole seconds)."""
        trigger = str(params.get("trigger_id") or "")
        age = trigger_age(trigger)
        if age is None:
            raise SlackError("invalid_trigger_id")
        if age > TRIGGER_SECONDS + 1:
            raise SlackError("expired_trigger_id")
        try:
            view = check_modal(_decode_json(params.get("view")))
        except ViewError as error:
            raise SlackError(error.error) from None
        stored = stored_view(view, self.ws.team_id, self.ws.app_id, self.ws.bot_id)
        self.modals[stored["id"]] = OpenModal(stored, trigger_id=trigger)
        return {"view": stored}

    def files_get_upload_url_external(self, params: dict[str, Any]) -> dict[str, Any]:
        filename = params.get("filename")
        try:
            length = int(params.get("length", ""))
        except ValueError as exc:
            raise SlackError("invalid_arguments") from exc
        if not filename or length < 0:
            raise SlackError("invalid_arguments")
        file_id = self._id("F")
        self.files[file_id] = UploadedFile(id=file_id, filename=str(filename), length=length)
        return {"upload_url": f"{self.upload_url_base}{file_id}", "file_id": file_id}

    def files_complete_upload_external(self, params: dict[str, Any]) -> dict[str, Any]:
        entries = _decode_json(params.get("files") or "[]")
        if not isinstance(entries, list) or not entries:
            raise SlackError("invalid_arguments")
        done = []
        for entry in entries:
            stored = self.files.get(str(entry.get("id")))
            if stored is None or stored.content is None:
                raise SlackError("file_not_found")
            stored.title = entry.get("title") or stored.filename
            stored.completed = True
            stored.channel_id = params.get("channel_id") or params.get("channels")
            stored.initial_comment = params.get("initial_comment")
            stored.thread_ts = params.get("thread_ts")
            done.append(
                {
                    "id": stored.id,
                    "created": int(time.time()),
                    "name": stored.filename,
                    "title": stored.title,
                    "size": len(stored.content),
                    "user": self.ws.bot_user_id,
                    "channels": [stored.channel_id] if stored.channel_id else [],
                }
            )
        return {"files": done}

    def store_upload(self, file_id: str, content: bytes) -> bool:
        """Keep the bytes POSTed to an upload_url; False if we never issued that URL."""
        stored = self.files.get(file_id)
        if stored is None:
            return False
        stored.content = content
        return True
