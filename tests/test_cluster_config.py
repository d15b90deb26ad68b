"""[[clusters]]: several clusters in one file; today's one-cluster file read as a list of one."""

from __future__ import annotations

import tomllib

import pytest

from bot.config import ConfigError, parse_config

TODAY = """
[slurm]
bin_dir = "/opt/slurm/bin"
poll_seconds = 5
[notifications]
cluster_name = "skynet"
[[labs]]
name = "hoffman-lab"
partition = "hoffman-lab"
account = "hoffman-lab"
"""

TWO = """
[[clusters]]
name = "skynet"
slurm_conf = "/etc/slurm/slurm.conf"
[clusters.slurm]
poll_seconds = 5
[[clusters.labs]]
name = "hoffman-lab"
partition = "hoffman-lab"
account = "hoffman-lab"

[[clusters]]
name = "nova"
source = "slurmrestd"
url = "unix:/run/slurmrestd/nova.sock"
token_file = "/etc/skybot/nova.jwt"
[[clusters.labs]]
name = "kira-lab"
partition = "kira"
account = "kira-lab"
"""


def parsed(text: str):  # type: ignore[no-untyped-def]
    return parse_config(tomllib.loads(text))


def test_todays_file_is_one_cluster_named_as_before_with_its_slurm_and_labs() -> None:
    config = parsed(TODAY)
    (cluster,) = config.clusters
    assert cluster.name == "skynet" and cluster.source == "cli"
    assert cluster.slurm.bin_dir == "/opt/slurm/bin" and cluster.slurm.poll_seconds == 5
    assert [lab.name for lab in cluster.labs] == ["hoffman-lab"]
    assert cluster.acts_through_runner
    assert config.default_cluster == cluster


def test_an_empty_file_serves_the_built_in_cluster() -> None:
    (cluster,) = parsed("").clusters
    assert cluster.name == "skynet" and cluster.slurm.bin_dir == "/usr/bin"


def test_two_clusters_the_first_is_the_default_and_a_lab_names_its_cluster() -> None:
    config = parsed(TWO)
    assert [c.name for c in config.clusters] == ["skynet", "nova"]
    # Code that serves one cluster reads the default's settings where it always did.
    assert config.slurm.poll_seconds == 5 and config.notifications.cluster_name == "skynet"
    assert [lab.name for lab in config.labs] == ["hoffman-lab"]
    nova = config.cluster_named("NOVA")
    assert nova is not None and nova.source == "slurmrestd"
    assert not nova.acts_through_runner  # a slurmrestd source refuses actions unless told
    assert config.cluster_of_lab("kira-lab") == nova
    assert config.cluster_of_lab("nobody-lab") is None


def test_a_slurmrestd_cluster_may_act_through_the_runner_where_the_commands_are() -> None:
    config = parsed(
        TWO.replace(
            'token_file = "/etc/skybot/nova.jwt"',
            'token_file = "/etc/skybot/nova.jwt"\nactions = "runner"',
        )
    )
    nova = config.cluster_named("nova")
    assert nova is not None and nova.acts_through_runner


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            TWO + "\n[slurm]\npoll_seconds = 3\n",
            "slurm: with [[clusters]], each cluster has its own (clusters.slurm)",
        ),
        (
            '[[labs]]\nname="a"\npartition="a"\naccount="a"\n[[clusters]]\nname="x"\n',
            "labs: with [[clusters]], each cluster has its own (clusters.labs)",
        ),
        (
            '[[clusters]]\nname="x"\n[[clusters]]\nname="x"\n',
            "clusters[1].name: duplicate cluster name 'x'",
        ),
        ('[[clusters]]\nname="a/b"\n', "clusters[0].name: 'a/b' is not a cluster name"),
        # Button values and the runner's [clusters.NAME] tables carry the name as it is.
        ('[[clusters]]\nname="Nova"\n', "clusters[0].name: 'Nova' is not a cluster name"),
        (
            '[[clusters]]\nname="x"\nsource="rest"\n',
            "clusters[0].source: 'rest' is not one of cli, slurmrestd",
        ),
        (
            '[[clusters]]\nname="x"\nsource="slurmrestd"\ntoken_file="/t"\n',
            "clusters[0].url: a slurmrestd source needs one",
        ),
        (
            '[[clusters]]\nname="x"\nsource="slurmrestd"\nurl="localhost:6820"\ntoken_file="/t"\n',
            "clusters[0].url: 'localhost:6820': expected http://HOST:PORT or unix:/PATH",
        ),
        (
            '[[clusters]]\nname="x"\nurl="http://h:1"\n',
            'clusters[0].url and token_file are for source = "slurmrestd"',
        ),
        (
            '[[clusters]]\nname="x"\nactions="sudo"\n',
            "clusters[0].actions: 'sudo' is not one of runner, none",
        ),
        (
            '[[clusters]]\nname="x"\nslurm_conf="slurm.conf"\n',
            "clusters[0].slurm_conf: 'slurm.conf' is not an absolute path",
        ),
        (
            TWO.replace('name = "kira-lab"', 'name = "Hoffman-Lab"'),
            "clusters: lab 'Hoffman-Lab' is in both 'skynet' and 'nova'",
        ),
        ('[[clusters]]\nname="x"\nbin_dir="/usr/bin"\n', "unknown config key: clusters[0].bin_dir"),
    ],
)
def test_a_wrong_clusters_table_is_one_line_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parsed(text)
    assert str(caught.value).startswith(message), str(caught.value)


def test_todays_cluster_name_is_kept_as_it_is_whatever_its_spelling() -> None:
    # Notice keys carry it: renaming it on upgrade would send every pending DM again.
    (cluster,) = parsed('[notifications]\ncluster_name = "SkyNet.Main"\n').clusters
    assert cluster.name == "SkyNet.Main"
