"""skybot's configuration file: one TOML file, read here and validated strictly at start-up.

The schema (every section, key, default and rule) is core/config_schema.py, where every layer
may import it; this module reads the file and the secrets. Secrets never live in the file:
they come from the environment under Bolt's usual names. Every error names the offending key
in one line (`ConfigError`), so `skybot run` can print it and exit 2 instead of dumping a
traceback.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from core.cluster_config import LabConfig as LabConfig
from core.cluster_config import SlurmConfig as SlurmConfig
from core.config_base import ConfigError as ConfigError
from core.config_schema import Config as Config
from core.config_schema import DatabaseConfig as DatabaseConfig
from core.config_schema import DigestConfig as DigestConfig
from core.config_schema import IdentityConfig as IdentityConfig
from core.config_schema import ImagesConfig as ImagesConfig
from core.config_schema import MetricsConfig as MetricsConfig
from core.config_schema import NotificationsConfig as NotificationsConfig
from core.config_schema import RunnerConfig as RunnerConfig
from core.config_schema import SlackConfig as SlackConfig
from core.config_schema import StorageConfig as StorageConfig
from core.config_schema import SubmitConfig as SubmitConfig
from core.config_schema import parse_config as parse_config

DEFAULT_CONFIG_PATH = Path("/etc/skybot/skybot.toml")


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


def database_path(config: Config) -> Path:
    return Path(config.database.path).expanduser()
