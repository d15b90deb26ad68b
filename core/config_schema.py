"""skybot's configuration schema: every section and key, its default and its rule.

Pure: bot/config.py reads the TOML file; `parse_config` turns its tables into a `Config`
with `msgspec.convert`, which checks types, bounds and unknown keys. Each section's own rules
(what a type cannot say) are in its `__post_init__`, whose messages start with the key, so
every problem becomes one `ConfigError` line naming the full key, e.g.
"slack.http_port must be a whole number, not a string" or "unknown config key: slack.port",
which `skybot run` prints before exiting 2.

Every layer may import this module; it imports only core.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
from msgspec import Meta, field

from core.cluster_config import CLUSTER_NAME, ClusterConfig, LabConfig, SlurmConfig, unique_labs
from core.config_base import (
    ConfigError,
    NonEmpty,
    NonNegative,
    NonNegativeInt,
    PositiveInt,
    Seconds,
    Section,
)
from core.config_errors import one_line
from core.digest import WEEKDAYS
from core.images import GUIDE_MIN_RELEASE, gpu_key, parse_release
from core.job_template import TemplateSettings, is_plain_path
from core.user_names import is_cluster_user_name

# What `/sky notify` and notifications.default_preference accept (core/job_notices.py `wants`).
PREFERENCES = ("all", "end", "fail", "preempt", "off")


class SlackConfig(Section, frozen=True):
    mode: str = "socket"  # "socket" or "http"
    http_host: str = "127.0.0.1"
    http_port: Annotated[int, Meta(ge=1, le=65535)] = 3000
    alert_channel: NonEmpty = "#skynet-users"
    # `skybot doctor` checks the bot is in alert_channel, which needs channels:read and
    # groups:read; off, the manifest asks for neither and the doctor says it did not check.
    doctor_checks_alert_channel: bool = True

    def __post_init__(self) -> None:
        if self.mode not in ("socket", "http"):
            raise ValueError(f"mode must be 'socket' or 'http', not {self.mode!r}")


class StorageConfig(Section, frozen=True):
    poll_seconds: Seconds = 300.0
    # disk-usage.txt files larger than this are garbage, not usage reports.
    max_usage_file_bytes: int = 4096


class DatabaseConfig(Section, frozen=True):
    path: str = "/var/lib/skybot/skybot.db"
    history_days: int = 90


_SLACK_LINK_KEY = re.compile(r"[TE][A-Z0-9]+/[UW][A-Z0-9]+")


class IdentityConfig(Section, frozen=True):
    """How a Slack user becomes a cluster user (strongest source first)."""

    # Admin-vouched links: "TEAM_ID/USER_ID" = "cluster_user".
    links: dict[str, str] = field(default_factory=dict)
    # If set, a full member whose Slack email is NAME@email_domain is cluster user NAME.
    email_domain: str = ""
    link_code_minutes: PositiveInt = 15
    # May one cluster account be linked to several Slack accounts? No (the default): a new
    # link replaces the old one. Either way the accounts linked before are told at once.
    several_slack_accounts: bool = False

    def __post_init__(self) -> None:
        for slack_id, user in self.links.items():
            if not _SLACK_LINK_KEY.fullmatch(slack_id):
                raise ValueError(f'links: {slack_id!r} must be TEAM_ID/USER_ID, e.g. "T0123/U0456"')
            if not is_cluster_user_name(user):
                raise ValueError(f"links: {user!r} is not a valid cluster user name")


class RunnerConfig(Section, frozen=True):
    """The sudo-scoped program that acts as a cluster user (`skybot install runner`)."""

    sudo: str = "/usr/bin/sudo"
    path: str = "/usr/local/libexec/skybot-runner"
    timeout_seconds: float = 60.0


class NotificationsConfig(Section, frozen=True):
    """Job DMs, storage-hoarding pings and full-filesystem warnings.

    core/job_notices.py and core/storage_alerts.py say what each setting decides.
    """

    # What a linked user gets until they choose with `/sky notify`:
    # all | end | fail | preempt | off.
    default_preference: str = "all"
    # Names this Slurm cluster in notification keys, so a rebuilt cluster's job ids start afresh.
    cluster_name: NonEmpty = "skynet"
    # Partitions whose requeues are preemptions, besides slurm.overcap_partition.
    preemptible_partitions: tuple[str, ...] = ()
    # A directory at least this big gets a hoarding ping (0: no size limit).
    hoard_threshold_bytes: NonNegativeInt = 10 * 1024**4
    # The N largest directories of each lab get a hoarding ping (0: off).
    hoard_top_n: NonNegativeInt = 0
    # A top-N directory under the size limit is pinged again only after growing by this much.
    hoard_regrow_fraction: NonNegative = 0.25
    # Fill levels (percent used) that each warn once when crossed upwards.
    filesystem_thresholds: tuple[float, ...] = (90.0, 95.0, 98.0)
    # A level warns again only after use fell this many points below it.
    rearm_margin: NonNegative = 3.0
    # Slack allows about one message per second per channel.
    messages_per_second_per_channel: Seconds = 1.0
    # And "several hundred messages per minute" across the workspace (every channel and DM).
    messages_per_minute: PositiveInt = 200
    # DM users whose jobs wait behind their lab's cap once the lab has been at it this long
    # (once per stretch at the cap; 0: off).
    cap_wait_minutes: float = 30.0
    # Failure DMs (failed, timed out, out of memory, node failure, preempted) end with this many
    # last lines of the job's stderr (and stdout), read as the job's owner; 0 turns it off for
    # everyone. Each user can turn it off with `/sky notify logs off`.
    log_tail_lines: Annotated[int, Meta(ge=0, le=200)] = 15
    # How long reading one job's output may take before the DM goes without it.
    log_tail_seconds: Annotated[float, Meta(gt=0, le=60)] = 10.0
    # Job-end DMs of jobs that ran at least this long show CPU efficiency, peak memory and
    # time used against what was requested, with advice when far off.
    efficiency_min_minutes: NonNegative = 5.0
    # While Slack refuses the bot token, the paused outbox checks it with auth.test after this
    # long, then twice as long each time, at most token_probe_max_seconds apart.
    token_probe_seconds: Seconds = 5.0
    token_probe_max_seconds: Seconds = 60.0

    def __post_init__(self) -> None:
        if self.token_probe_max_seconds < self.token_probe_seconds:
            raise ValueError(
                f"token_probe_max_seconds ({self.token_probe_max_seconds:g}) must be at least "
                f"token_probe_seconds ({self.token_probe_seconds:g})"
            )
        if self.default_preference not in PREFERENCES:
            raise ValueError(
                "default_preference must be one of "
                f"{', '.join(PREFERENCES)}, not {self.default_preference!r}"
            )
        levels = self.filesystem_thresholds
        if any(not 0 < t <= 100 for t in levels) or list(levels) != sorted(set(levels)):
            raise ValueError("filesystem_thresholds must be increasing percentages in (0, 100]")


class SubmitConfig(Section, frozen=True):
    """Limits on `/sky submit`, per cluster user."""

    max_queued_per_user: int = 5
    max_per_minute: int = 3
    # Partitions besides the labs' and overcap that chat submissions may use.
    extra_partitions: tuple[str, ...] = ("debug",)


class MetricsConfig(Section, frozen=True):
    """Prometheus /metrics, /livez and /readyz, on loopback by default; port 0 turns them off."""

    host: str = "127.0.0.1"
    port: Annotated[int, Meta(ge=0, le=65535)] = 0
    # /readyz fails once Slurm's snapshot is older than this many poll intervals.
    stale_after_polls: float = 4.0


class ImagesConfig(Section, frozen=True):
    """`/sky images`: the Enroot image directory, listed by the storage poller."""

    # Where the `*.sqsh` images and their `.packages` lists are; "" turns the listing off.
    # `/sky template --image NAME` points into it too (template.image_dir).
    dir: str = "/enroot"
    # A list bigger than this is not a pip freeze of one image; it is reported, not read.
    max_packages_file_bytes: PositiveInt = 1024 * 1024
    # GPU type -> oldest NGC release (YY.MM) that runs on it, for `--gpu TYPE`. Seeded with the
    # container guide's rules; a table in the file replaces the whole default.
    min_release: dict[str, str] = field(default_factory=lambda: dict(GUIDE_MIN_RELEASE))

    def __post_init__(self) -> None:
        if self.dir and not self.dir.startswith("/"):
            raise ValueError(f"dir: {self.dir!r} is not an absolute path")
        if self.dir and not is_plain_path(self.dir):
            raise ValueError(f"dir: {self.dir!r} must be a plain absolute path")
        seen: dict[str, str] = {}
        for gpu_type, release in self.min_release.items():
            if parse_release(release) is None:
                raise ValueError(
                    f'min_release.{gpu_type}: {release!r} is not an NGC release like "20.06"'
                )
            key = gpu_key(gpu_type)
            if not key:
                raise ValueError(f"min_release: {gpu_type!r} is not a GPU type name")
            if key in seen:
                raise ValueError(
                    f"min_release: {gpu_type!r} and {seen[key]!r} name the same GPU type"
                )
            seen[key] = gpu_type


class DigestConfig(Section, frozen=True):
    """The weekly lab digest, for channels that opted in with `/sky digest LAB on`."""

    # When it is posted, in the skybot host's local time: mon … sun, and the hour (0-23).
    weekday: str = "mon"
    hour: Annotated[int, Meta(ge=0, le=23)] = 9
    # A digest missed while skybot was down is still posted if it is back within this.
    catch_up_hours: NonNegative = 24.0
    # Users listed by GPU-hours; the rest are summed up in one line.
    top_users: PositiveInt = 10

    def __post_init__(self) -> None:
        if self.weekday not in WEEKDAYS:
            raise ValueError(f"weekday must be one of {', '.join(WEEKDAYS)}, not {self.weekday!r}")


class WatchConfig(Section, frozen=True):
    """GPU watches (`/sky watch TYPE:N`): how many and how long."""

    # Active watches one Slack user may have at once.
    max_per_user: PositiveInt = 5
    # How long a watch lasts without `--for`, and the longest `--for` allowed.
    default_hours: Seconds = 4.0
    max_hours: Seconds = 24.0
    # The shortest `--for` allowed (a short one is handy in tests and demos).
    min_seconds: Seconds = 10.0

    def __post_init__(self) -> None:
        if self.default_hours > self.max_hours:
            raise ValueError(
                f"default_hours ({self.default_hours:g}) must not exceed max_hours "
                f"({self.max_hours:g})"
            )
        if self.min_seconds > 3600 * self.max_hours:
            raise ValueError("min_seconds must not exceed max_hours")


class Config(Section, frozen=True):
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
    watches: WatchConfig = field(default_factory=WatchConfig)
    # `/sky template`: the settings are the core's own Struct, so nothing is copied over.
    template: TemplateSettings = field(default_factory=TemplateSettings)
    images: ImagesConfig = field(default_factory=ImagesConfig)
    labs: tuple[LabConfig, ...] = ()
    # Empty in a file without [[clusters]]: parse_config makes the one cluster of [slurm],
    # [[labs]] and notifications.cluster_name, so a parsed Config always lists its clusters,
    # and `slurm`, `labs` and `notifications.cluster_name` are the first (default) cluster's.
    clusters: tuple[ClusterConfig, ...] = ()

    def __post_init__(self) -> None:
        unique_labs(self.labs)
        names: set[str] = set()
        for i, cluster in enumerate(self.clusters):
            if cluster.name.casefold() in names:
                raise ValueError(f"clusters[{i}].name: duplicate cluster name {cluster.name!r}")
            names.add(cluster.name.casefold())
        owners: dict[str, str] = {}
        for cluster in self.clusters:
            for lab in cluster.labs:
                other = owners.setdefault(lab.name.casefold(), cluster.name)
                if other != cluster.name:
                    raise ValueError(
                        f"clusters: lab {lab.name!r} is in both {other!r} and "
                        f"{cluster.name!r} (a lab's name selects its cluster)"
                    )

    @property
    def default_cluster(self) -> ClusterConfig:
        """The cluster a command means when it names none: the first, with the top level's
        [slurm] and labs (parse_config makes them the first's; a caller that replaced them on
        a parsed config, tests and tools, gets what it put there)."""
        if not self.clusters:
            return self._implied_cluster()
        first = self.clusters[0]
        if first.slurm == self.slurm and first.labs == self.labs:
            return first
        return msgspec.structs.replace(first, slurm=self.slurm, labs=self.labs)

    def _implied_cluster(self) -> ClusterConfig:
        return ClusterConfig(self.notifications.cluster_name, slurm=self.slurm, labs=self.labs)

    def cluster_named(self, name: str) -> ClusterConfig | None:
        wanted = name.casefold()
        return next((c for c in self.clusters if c.name.casefold() == wanted), None)

    def cluster_of_lab(self, lab_name: str) -> ClusterConfig | None:
        wanted = lab_name.casefold()
        return next(
            (c for c in self.clusters if any(lab.name.casefold() == wanted for lab in c.labs)),
            None,
        )

    def lab_anywhere(self, name: str) -> tuple[ClusterConfig, LabConfig] | None:
        """The lab called `name` on whichever cluster has it (a lab's name is one across
        clusters), with that cluster."""
        wanted = name.casefold()
        default = self.default_cluster
        for cluster in (default, *(c for c in self.clusters if c.name != default.name)):
            lab = next((lab for lab in cluster.labs if lab.name.casefold() == wanted), None)
            if lab is not None:
                return cluster, lab
        return None


def parse_config(data: dict[str, Any]) -> Config:
    """The configuration decoded TOML describes; ConfigError (one line) if it is wrong."""
    template = data.get("template")
    if isinstance(template, dict) and "image_dir" in template:
        raise ConfigError("template.image_dir is set by images.dir (one image directory)")
    if data.get("clusters"):
        for section in ("slurm", "labs"):
            if section in data:
                raise ConfigError(
                    f"{section}: with [[clusters]], each cluster has its own "
                    f"(clusters.{section}); the first cluster is the default"
                )
    try:
        config = msgspec.convert(data, Config)
    except msgspec.ValidationError as error:
        raise ConfigError(one_line(error)) from None
    _check_cluster_names(config.clusters)
    config = _with_clusters_listed(config)
    # `/sky template --image NAME` points at the directory `/sky images` lists.
    if config.images.dir:
        template_settings = msgspec.structs.replace(config.template, image_dir=config.images.dir)
        config = msgspec.structs.replace(config, template=template_settings)
    return config


def _check_cluster_names(clusters: tuple[ClusterConfig, ...]) -> None:
    """[[clusters]] names travel in button values and the runner's tables, so they follow one
    rule. Not ClusterConfig's own: today's notifications.cluster_name names the implied one
    cluster as it is, keeping its notice keys."""
    for i, cluster in enumerate(clusters):
        if not CLUSTER_NAME.fullmatch(cluster.name):
            raise ConfigError(
                f"clusters[{i}].name: {cluster.name!r} is not a cluster name (lowercase "
                "letters, digits, '_', '-'; at most 40, starting with a letter or digit)"
            )


def _with_clusters_listed(config: Config) -> Config:
    """Today's one-cluster file as a list of one; or, with [[clusters]], the first cluster's
    settings where the code that serves one cluster reads them."""
    if not config.clusters:
        return msgspec.structs.replace(config, clusters=(config.default_cluster,))
    first = config.clusters[0]
    notifications = msgspec.structs.replace(config.notifications, cluster_name=first.name)
    return msgspec.structs.replace(
        config, slurm=first.slurm, labs=first.labs, notifications=notifications
    )
