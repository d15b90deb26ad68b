"""skybot's configuration: one TOML file, validated strictly at start-up.

Secrets never live in the file: they come from the environment under Bolt's usual names.
Every error names the offending key in one line (`ConfigError`), so `skybot run` can print it
and exit 2 instead of dumping a traceback.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, get_type_hints

from core.digest import WEEKDAYS
from core.images import GUIDE_MIN_RELEASE, gpu_key, parse_release
from core.job_notices import PREFERENCES
from core.job_template import TemplateSettings

DEFAULT_CONFIG_PATH = Path("/etc/skybot/skybot.toml")


class ConfigError(Exception):
    """A configuration problem, phrased as one line for the operator."""


@dataclass(frozen=True)
class SlackConfig:
    mode: str = "socket"  # "socket" or "http"
    http_host: str = "127.0.0.1"
    http_port: int = 3000
    alert_channel: str = "#skynet-users"


@dataclass(frozen=True)
class SlurmConfig:
    bin_dir: str = "/usr/bin"
    command_timeout_seconds: float = 20.0
    poll_seconds: float = 15.0
    caps_poll_seconds: float = 300.0
    overcap_partition: str = "overcap"
    overcap_account: str = "overcap"
    # Each sacct read re-reads this much before the previous poll: slurmdbd records a job's
    # end a little after the controller. A job's end is announced once however it is set.
    sacct_overlap_seconds: float = 300.0
    # A poll that takes more than this share of poll_seconds stretches the interval (a huge
    # queue must not turn skybot into the `watch squeue` it replaces); it shrinks back once
    # polls are cheap again.
    max_poll_share: float = 0.25


@dataclass(frozen=True)
class StorageConfig:
    poll_seconds: float = 300.0
    # disk-usage.txt files larger than this are garbage, not usage reports.
    max_usage_file_bytes: int = 4096


@dataclass(frozen=True)
class DatabaseConfig:
    path: str = "/var/lib/skybot/skybot.db"
    history_days: int = 90


@dataclass(frozen=True)
class IdentityConfig:
    """How a Slack user becomes a cluster user (strongest source first)."""

    # Admin-vouched links: "TEAM_ID/USER_ID" = "cluster_user".
    links: dict[str, str] = field(default_factory=dict)
    # If set, a full member whose Slack email is NAME@email_domain is cluster user NAME.
    email_domain: str = ""
    link_code_minutes: int = 15


@dataclass(frozen=True)
class RunnerConfig:
    """The sudo-scoped program that acts as a cluster user (`skybot install runner`)."""

    sudo: str = "/usr/bin/sudo"
    path: str = "/usr/local/libexec/skybot-runner"
    timeout_seconds: float = 60.0


@dataclass(frozen=True)
class NotificationsConfig:
    """Job DMs, storage-hoarding pings and full-filesystem warnings.

    core/job_notices.py and core/storage_alerts.py say what each setting decides.
    """

    # What a linked user gets until they choose with `/sky notify`:
    # all | end | fail | preempt | off.
    default_preference: str = "all"
    # Names this Slurm cluster in notification keys, so a rebuilt cluster's job ids start afresh.
    cluster_name: str = "skynet"
    # Partitions whose requeues are preemptions, besides slurm.overcap_partition.
    preemptible_partitions: tuple[str, ...] = ()
    # A directory at least this big gets a hoarding ping (0: no size limit).
    hoard_threshold_bytes: int = 10 * 1024**4
    # The N largest directories of each lab get a hoarding ping (0: off).
    hoard_top_n: int = 0
    # A top-N directory under the size limit is pinged again only after growing by this much.
    hoard_regrow_fraction: float = 0.25
    # Fill levels (percent used) that each warn once when crossed upwards.
    filesystem_thresholds: tuple[float, ...] = (90.0, 95.0, 98.0)
    # A level warns again only after use fell this many points below it.
    rearm_margin: float = 3.0
    # Slack allows about one message per second per channel.
    messages_per_second_per_channel: float = 1.0
    # DM users whose jobs wait behind their lab's cap once the lab has been at it this long
    # (once per stretch at the cap; 0: off).
    cap_wait_minutes: float = 30.0


@dataclass(frozen=True)
class SubmitConfig:
    """Limits on `/sky submit`, per cluster user."""

    max_queued_per_user: int = 5
    max_per_minute: int = 3
    # Partitions besides the labs' and overcap that chat submissions may use.
    extra_partitions: tuple[str, ...] = ("debug",)


@dataclass(frozen=True)
class MetricsConfig:
    """Prometheus /metrics, /livez and /readyz, on loopback by default; port 0 turns them off."""

    host: str = "127.0.0.1"
    port: int = 0
    # /readyz fails once Slurm's snapshot is older than this many poll intervals.
    stale_after_polls: float = 4.0


@dataclass(frozen=True)
class ImagesConfig:
    """`/sky images`: the Enroot image directory, listed by the storage poller."""

    # Where the `*.sqsh` images and their `.packages` lists are; "" turns the listing off.
    dir: str = "/enroot"
    # A list bigger than this is not a pip freeze of one image; it is reported, not read.
    max_packages_file_bytes: int = 1024 * 1024
    # GPU type -> oldest NGC release (YY.MM) that runs on it, for `--gpu TYPE`. Seeded with the
    # container guide's rules; a table in the file replaces the whole default.
    min_release: dict[str, str] = field(default_factory=lambda: dict(GUIDE_MIN_RELEASE))


@dataclass(frozen=True)
class DigestConfig:
    """The weekly lab digest, for channels that opted in with `/sky digest LAB on`."""

    # When it is posted, in the skybot host's local time: mon … sun, and the hour (0-23).
    weekday: str = "mon"
    hour: int = 9
    # A digest missed while skybot was down is still posted if it is back within this.
    catch_up_hours: float = 24.0
    # Users listed by GPU-hours; the rest are summed up in one line.
    top_users: int = 10


@dataclass(frozen=True)
class LabConfig:
    name: str
    partition: str
    account: str
    storage_roots: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    slack: SlackConfig = field(default_factory=SlackConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    database: DatabaseConfig = field(default_factory=DatabaseConfig)
    identity: IdentityConfig = field(default_factory=IdentityConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    submit: SubmitConfig = field(default_factory=SubmitConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    notifications: NotificationsConfig = field(default_factory=NotificationsConfig)
    digest: DigestConfig = field(default_factory=DigestConfig)
    # `/sky template`: the settings are the core's own dataclass, so nothing is copied over.
    template: TemplateSettings = field(default_factory=TemplateSettings)
    images: ImagesConfig = field(default_factory=ImagesConfig)
    labs: tuple[LabConfig, ...] = ()

    def lab_named(self, name: str) -> LabConfig | None:
        wanted = name.casefold()
        return next((lab for lab in self.labs if lab.name.casefold() == wanted), None)

    def lab_for_account(self, account: str) -> LabConfig | None:
        return next((lab for lab in self.labs if lab.account == account), None)

    def lab_for_partition(self, partition: str) -> LabConfig | None:
        return next((lab for lab in self.labs if lab.partition == partition), None)


@dataclass(frozen=True)
class Secrets:
    """Tokens from the environment. repr() never shows them."""

    bot_token: str = field(default="", repr=False)
    app_token: str = field(default="", repr=False)
    signing_secret: str = field(default="", repr=False)
    api_url: str | None = None

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Secrets:
        env = os.environ if environ is None else environ
        return cls(
            bot_token=env.get("SLACK_BOT_TOKEN", ""),
            app_token=env.get("SLACK_APP_TOKEN", ""),
            signing_secret=env.get("SLACK_SIGNING_SECRET", ""),
            api_url=env.get("SLACK_API_URL") or None,
        )

    def require_for(self, mode: str) -> None:
        """Raise ConfigError naming the first missing variable this transport needs."""
        needed = {"SLACK_BOT_TOKEN": self.bot_token}
        if mode == "socket":
            needed["SLACK_APP_TOKEN"] = self.app_token
        else:
            needed["SLACK_SIGNING_SECRET"] = self.signing_secret
        for name, value in needed.items():
            if not value:
                raise ConfigError(f"{name} is not set in the environment (needed for {mode} mode)")
        if mode == "socket" and not self.app_token.startswith("xapp-"):
            raise ConfigError("SLACK_APP_TOKEN must be an app-level token (xapp-…)")


# The configuration `skybot console` and `skybot poll` use when no file is given: it describes
# the local test cluster that deploy/testcluster.sh brings up.
EMBEDDED_DEFAULT_TOML = """
[database]
path = "~/.local/state/skybot/skybot.db"

[[labs]]
name = "hoffman-lab"
partition = "hoffman-lab"
account = "hoffman-lab"
storage_roots = ["/srv/hoffman-lab/flash9"]

[[labs]]
name = "kira-lab"
partition = "kira-lab"
account = "kira-lab"
storage_roots = ["/srv/kira-lab/share4"]
"""


def load_config(path: Path | None) -> Config:
    """Read and validate a config file; None means the embedded default."""
    if path is None:
        return parse_config(tomllib.loads(EMBEDDED_DEFAULT_TOML))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path} is not valid TOML: {error}") from None
    return parse_config(data)


def parse_config(data: dict[str, Any]) -> Config:
    sections = {
        "slack": SlackConfig,
        "slurm": SlurmConfig,
        "storage": StorageConfig,
        "database": DatabaseConfig,
        "identity": IdentityConfig,
        "runner": RunnerConfig,
        "submit": SubmitConfig,
        "metrics": MetricsConfig,
        "notifications": NotificationsConfig,
        "digest": DigestConfig,
        "template": TemplateSettings,
        "images": ImagesConfig,
    }
    unknown = set(data) - set(sections) - {"labs"}
    if unknown:
        raise ConfigError(f"unknown config section or key: {sorted(unknown)[0]}")
    values: dict[str, Any] = {
        name: _build(cls, data.get(name, {}), name) for name, cls in sections.items()
    }
    labs_data = data.get("labs", [])
    if not isinstance(labs_data, list):
        raise ConfigError("labs must be an array of tables ([[labs]])")
    labs = tuple(_build(LabConfig, lab, f"labs[{i}]") for i, lab in enumerate(labs_data))
    seen: set[str] = set()
    for i, lab in enumerate(labs):
        if lab.name.casefold() in seen:
            raise ConfigError(f"labs[{i}].name: duplicate lab name {lab.name!r}")
        seen.add(lab.name.casefold())
    if "image_dir" in data.get("template", {}):
        raise ConfigError("template.image_dir is set by images.dir (one image directory)")
    # `/sky template --image NAME` points at the directory `/sky images` lists.
    if values["images"].dir:
        values["template"] = replace(values["template"], image_dir=values["images"].dir)
    config = Config(**values, labs=labs)
    _check_values(config)
    return config


def _build(cls: type, table: Any, where: str) -> Any:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    hints = get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    for key in table:
        if key not in known:
            raise ConfigError(f"unknown config key: {where}.{key}")
    kwargs: dict[str, Any] = {}
    for name, f in known.items():
        if name not in table:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ConfigError(f"missing config key: {where}.{name}")
            continue
        kwargs[name] = _coerce(table[name], hints[name], f"{where}.{name}")
    return cls(**kwargs)


def _coerce(value: Any, hint: Any, key: str) -> Any:
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key} must be true or false, not {value!r}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key} must be a whole number, not {value!r}")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(f"{key} must be a number, not {value!r}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{key} must be a string, not {value!r}")
    if hint == dict[str, str]:
        if isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            return dict(value)
        raise ConfigError(f"{key} must be a table of strings")
    if hint == dict[str, int]:
        if isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
            for k, v in value.items()
        ):
            return dict(value)
        raise ConfigError(f"{key} must be a table of whole numbers")
    if hint == tuple[str, ...]:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise ConfigError(f"{key} must be a list of strings")
    if hint == tuple[float, ...]:
        if isinstance(value, list) and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value
        ):
            return tuple(float(v) for v in value)
        raise ConfigError(f"{key} must be a list of numbers")
    raise ConfigError(f"{key}: unsupported type")  # pragma: no cover - schema bug


def _check_values(config: Config) -> None:
    if config.slack.mode not in ("socket", "http"):
        raise ConfigError(f"slack.mode must be 'socket' or 'http', not {config.slack.mode!r}")
    if not 0 <= config.metrics.port < 65536:
        raise ConfigError("metrics.port must be between 0 (off) and 65535")
    if not 0 < config.slack.http_port < 65536:
        raise ConfigError("slack.http_port must be between 1 and 65535")
    for key, seconds in (
        ("slurm.poll_seconds", config.slurm.poll_seconds),
        ("slurm.caps_poll_seconds", config.slurm.caps_poll_seconds),
        ("slurm.command_timeout_seconds", config.slurm.command_timeout_seconds),
        ("storage.poll_seconds", config.storage.poll_seconds),
    ):
        if seconds <= 0:
            raise ConfigError(f"{key} must be greater than 0")
    if config.slurm.sacct_overlap_seconds < 0:
        raise ConfigError("slurm.sacct_overlap_seconds must not be negative")
    if not 0 < config.slurm.max_poll_share <= 1:
        raise ConfigError("slurm.max_poll_share must be greater than 0 and at most 1")
    if not config.slack.alert_channel:
        raise ConfigError("slack.alert_channel must not be empty")
    for slack_id, user in config.identity.links.items():
        if not _SLACK_LINK_KEY.fullmatch(slack_id):
            raise ConfigError(
                f'identity.links: {slack_id!r} must be TEAM_ID/USER_ID, e.g. "T0123/U0456"'
            )
        if not _CLUSTER_USER.fullmatch(user):
            raise ConfigError(f"identity.links: {user!r} is not a valid cluster user name")
    if config.identity.link_code_minutes <= 0:
        raise ConfigError("identity.link_code_minutes must be greater than 0")
    for i, lab in enumerate(config.labs):
        for root in lab.storage_roots:
            if not root.startswith("/"):
                raise ConfigError(f"labs[{i}].storage_roots: {root!r} is not an absolute path")
    _check_notifications(config.notifications)
    _check_digest(config.digest)
    # Images first: template.image_dir comes from images.dir.
    _check_images(config.images)
    _check_template(config.template)


_PREFERENCES = PREFERENCES
# sbatch sizes: a number with an optional K/M/G/T unit (what --mem-per-gpu accepts).
_MEMORY = re.compile(r"[1-9][0-9]*[KMGT]?")
# Written into #SBATCH lines and shell words as they are: nothing sbatch or bash would parse.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.+-]+")
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9_.+/-]*")


def _check_template(t: TemplateSettings) -> None:
    for gpu_type, cpus in t.cpus_per_task_by_gpu.items():
        if not _PLAIN_NAME.fullmatch(gpu_type) or cpus < 1:
            raise ConfigError(
                f"template.cpus_per_task_by_gpu: {gpu_type!r} = {cpus!r} must map a GPU type "
                "to at least 1 CPU"
            )
    if t.default_cpus_per_task < 1:
        raise ConfigError("template.default_cpus_per_task must be at least 1")
    if not _MEMORY.fullmatch(t.mem_per_gpu):
        raise ConfigError(f'template.mem_per_gpu must be like "16G", not {t.mem_per_gpu!r}')
    # sbatch --signal takes at most 65535 seconds.
    if not 1 <= t.signal_lead_seconds <= 65535:
        raise ConfigError("template.signal_lead_seconds must be between 1 and 65535")
    if not _PLAIN_PATH.fullmatch(t.image_dir):
        raise ConfigError(f"template.image_dir: {t.image_dir!r} must be a plain absolute path")
    if not _PLAIN_NAME.fullmatch(t.job_name):
        raise ConfigError(f"template.job_name: {t.job_name!r} must be one plain word")


def _check_digest(d: DigestConfig) -> None:
    if d.weekday not in WEEKDAYS:
        raise ConfigError(f"digest.weekday must be one of {', '.join(WEEKDAYS)}, not {d.weekday!r}")
    if not 0 <= d.hour <= 23:
        raise ConfigError("digest.hour must be between 0 and 23")
    if d.catch_up_hours < 0 or d.top_users < 1:
        raise ConfigError("digest.catch_up_hours must not be negative, digest.top_users >= 1")


def _check_notifications(n: NotificationsConfig) -> None:
    if n.default_preference not in _PREFERENCES:
        raise ConfigError(
            "notifications.default_preference must be one of "
            f"{', '.join(_PREFERENCES)}, not {n.default_preference!r}"
        )
    if not n.cluster_name:
        raise ConfigError("notifications.cluster_name must not be empty")
    for key, value in (
        ("hoard_threshold_bytes", n.hoard_threshold_bytes),
        ("hoard_top_n", n.hoard_top_n),
        ("hoard_regrow_fraction", n.hoard_regrow_fraction),
        ("rearm_margin", n.rearm_margin),
    ):
        if value < 0:
            raise ConfigError(f"notifications.{key} must not be negative")
    levels = n.filesystem_thresholds
    if any(not 0 < t <= 100 for t in levels) or list(levels) != sorted(set(levels)):
        raise ConfigError(
            "notifications.filesystem_thresholds must be increasing percentages in (0, 100]"
        )
    if n.messages_per_second_per_channel <= 0:
        raise ConfigError("notifications.messages_per_second_per_channel must be greater than 0")


def _check_images(images: ImagesConfig) -> None:
    if images.dir and not images.dir.startswith("/"):
        raise ConfigError(f"images.dir: {images.dir!r} is not an absolute path")
    if images.max_packages_file_bytes <= 0:
        raise ConfigError("images.max_packages_file_bytes must be greater than 0")
    seen: dict[str, str] = {}
    for gpu_type, release in images.min_release.items():
        if parse_release(release) is None:
            raise ConfigError(
                f'images.min_release.{gpu_type}: {release!r} is not an NGC release like "20.06"'
            )
        key = gpu_key(gpu_type)
        if not key:
            raise ConfigError(f"images.min_release: {gpu_type!r} is not a GPU type name")
        if key in seen:
            raise ConfigError(
                f"images.min_release: {gpu_type!r} and {seen[key]!r} name the same GPU type"
            )
        seen[key] = gpu_type


_SLACK_LINK_KEY = re.compile(r"[TE][A-Z0-9]+/[UW][A-Z0-9]+")
_CLUSTER_USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")


def database_path(config: Config) -> Path:
    return Path(config.database.path).expanduser()
