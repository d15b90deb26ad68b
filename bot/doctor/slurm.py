"""Slurm: each command the pollers run answers, each lab's partition and account exist, and
slurmdbd stores the job comments a crashed submission is found by."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from bot.adoption import cluster_labs
from bot.config import Config
from bot.doctor.checklist import Check
from bot.doctor.restd import check_restd
from core.cluster_config import ClusterConfig
from scheduler.slurm.commands import SlurmCommandError, run_slurm, run_slurm_json

SLURM_TIMEOUT_SECONDS = 10.0
SLURM_FIX = (
    "Is slurmctld (and slurmdbd, for sacct/sacctmgr) reachable from this host, and is "
    "slurm.bin_dir the directory holding the Slurm commands?"
)


def _count(document: object, key: str) -> int:
    value = document.get(key) if isinstance(document, dict) else None
    return len(value) if isinstance(value, list) else 0


def _conf(cluster: ClusterConfig) -> str | None:
    """The SLURM_CONF the cluster's commands run with."""
    return cluster.slurm_conf or None


async def _slurm_check(
    cluster: ClusterConfig, label: str, command: str, args: list[str], key: str
) -> Check:
    """Run one command the pollers run, the way they run it, with a short timeout."""
    timeout = min(cluster.slurm.command_timeout_seconds, SLURM_TIMEOUT_SECONDS)
    try:
        if key:
            document = await run_slurm_json(
                cluster.slurm.bin_dir, command, args, timeout, _conf(cluster)
            )
            what = f"{_count(document, key)} {key}"
        else:
            raw = await run_slurm(cluster.slurm.bin_dir, command, args, timeout, _conf(cluster))
            what = f"{len(raw.splitlines())} associations"
    except SlurmCommandError as error:
        return Check("slurm", False, f"{label} failed: {error}", SLURM_FIX)
    return Check("slurm", True, f"{label} answered ({what})")


async def check_slurm(config: Config) -> list[Check]:
    """Each cluster through its own source, as its pollers read it: the commands (with its
    slurm.conf) or its slurmrestd. With several clusters each check names its cluster."""
    several = len(config.clusters) > 1
    clusters = [cluster_labs(config, cluster) for cluster in config.clusters]
    found = await asyncio.gather(
        *(
            check_restd(cluster) if cluster.source == "slurmrestd" else check_commands(cluster)
            for cluster in clusters
        )
    )
    return [
        replace(check, name=f"{check.name} on {cluster.name}") if several else check
        for cluster, checks in zip(clusters, found, strict=True)
        for check in checks
    ]


async def check_commands(cluster: ClusterConfig) -> list[Check]:
    """`cluster`, through its commands."""
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 3600))
    commands: list[tuple[str, str, list[str], str]] = [
        ("squeue --json", "squeue", ["--all", "--json"], "jobs"),
        ("sinfo --json", "sinfo", ["--json"], "nodes"),
        ("sacct --json", "sacct", ["--json", "--allusers", f"--starttime={since}"], "jobs"),
        (
            "sacctmgr show assoc",
            "sacctmgr",
            ["--parsable2", "--noheader", "show", "associations", "format=account,user,grptres"],
            "",
        ),
    ]
    checks = await asyncio.gather(
        *(_slurm_check(cluster, *c) for c in commands), check_job_comments(cluster)
    )
    return [*checks, *await check_labs_in_slurm(cluster)]


async def _slurm_names(cluster: ClusterConfig, command: str, args: list[str]) -> set[str]:
    timeout = min(cluster.slurm.command_timeout_seconds, SLURM_TIMEOUT_SECONDS)
    raw = await run_slurm(cluster.slurm.bin_dir, command, args, timeout, _conf(cluster))
    return {line.strip() for line in raw.decode(errors="replace").splitlines() if line.strip()}


async def check_labs_in_slurm(cluster: ClusterConfig) -> list[Check]:
    """Each lab's partition must exist in Slurm (sinfo) and its account in the accounting
    database (sacctmgr): a typo there gives every /sky answer for that lab an empty lab."""
    try:
        partitions = await _slurm_names(cluster, "sinfo", ["--noheader", "--format=%R"])
        accounts = await _slurm_names(
            cluster, "sacctmgr", ["--parsable2", "--noheader", "show", "account", "format=account"]
        )
    except SlurmCommandError as error:
        fail = f"cannot list partitions and accounts: {error}"
        return [Check("slurm labs", False, fail, SLURM_FIX)]
    places = [(f"lab {lab.name}", "labs.", lab.partition, lab.account) for lab in cluster.labs]
    overcap = ("overcap", "slurm.overcap_", cluster.slurm.overcap_partition)
    places.append((*overcap, cluster.slurm.overcap_account))
    return [judge_lab(*place, partitions, accounts) for place in places]


def judge_lab(
    what: str, key: str, partition: str, account: str, partitions: set[str], accounts: set[str]
) -> Check:
    """`key` says where the config sets them: "labs." or "slurm.overcap_"."""
    name = f"slurm {what}"
    if partition not in partitions:
        return Check(
            name,
            False,
            f"Slurm has no partition {partition!r}",
            f"Correct {key}partition for {what} (Slurm has {', '.join(sorted(partitions))}), "
            f"or add PartitionName={partition} to slurm.conf.",
        )
    if account not in accounts:
        return Check(
            name,
            False,
            f"the accounting database has no account {account!r}",
            f"Correct {key}account for {what} (Slurm has {', '.join(sorted(accounts))}), or "
            f"`sacctmgr add account {account}`.",
        )
    return Check(name, True, f"partition {partition} and account {account} exist")


async def check_job_comments(cluster: ClusterConfig) -> Check:
    """Chat submissions are tagged with a job comment; after a crash mid-submit, skybot looks
    for the tag to avoid submitting twice, and a job that already ended is only found if
    slurmdbd stores comments."""
    timeout = min(cluster.slurm.command_timeout_seconds, SLURM_TIMEOUT_SECONDS)
    try:
        raw = await run_slurm(
            cluster.slurm.bin_dir, "scontrol", ["show", "config"], timeout, _conf(cluster)
        )
    except SlurmCommandError as error:
        return Check("job comments", False, f"scontrol show config failed: {error}", SLURM_FIX)
    flags = next(
        (
            line.partition("=")[2].strip()
            for line in raw.decode(errors="replace").splitlines()
            if line.split("=", 1)[0].strip() == "AccountingStoreFlags"
        ),
        "",
    )
    if "job_comment" in flags:
        return Check("job comments", True, "slurmdbd stores job comments (job_comment)")
    return Check(
        "job comments",
        True,
        f"AccountingStoreFlags is {flags or 'unset'}: sacct shows no job comments, so after a "
        "crash mid-submit a chat submission whose job already ended could be submitted again",
        "Add AccountingStoreFlags=job_comment to slurm.conf and restart slurmctld.",
        warning=True,
    )
