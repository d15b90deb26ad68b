"""Exit codes of `skybot run` besides 0 (stopped by a signal); README.md, "Operations".

A module of its own so that the CLI knows them without importing the store: `skybot
--version`, `install` and `show` start in a fraction of the time `run` needs. The codes a
restart cannot fix are in the unit's RestartPreventExitStatus= (bot/install_files/skybot.service).
"""

EXIT_PORT_UNAVAILABLE = 1
EXIT_CONFIG = 2
EXIT_ALREADY_RUNNING = 3
EXIT_SCHEMA_TOO_NEW = 4
EXIT_DATABASE_UNUSABLE = 5
EXIT_SLURM_TOKEN_UNSAFE = 6
