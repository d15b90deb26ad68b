#!/usr/bin/env bash
# One-time set-up of a fresh Debian 12 machine (as root) for trying skybot and running its
# tests: Debian's Slurm, MariaDB and munge, skybot itself with its test tools, and the two local
# test clusters: Slurm 22.05 on this host, Slurm 24.11 in a Debian 13 sandbox. Safe to run
# again: each step checks before it acts.
#
#   deploy/dev-setup.sh                 everything the tests need
#   deploy/dev-setup.sh --without-24.11 only the 22.05 cluster (a quicker try-out; the
#                                       24.11 lane of the tests then fails)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
with_2411=1
case ${1:-} in
    "") ;;
    --without-24.11) with_2411=0 ;;
    *) echo "usage: $0 [--without-24.11]" >&2; exit 2 ;;
esac
# systemd: only for `systemd-analyze verify` of the shipped unit in the tests; python3-venv:
# tests/test_wheel_install.py installs the built wheel into a fresh venv, as a site does;
# mmdebstrap: builds the Debian 13 root filesystem of the 24.11 cluster; acl: setfacl, with
# which tests/test_link_acl_cluster.py grants bob write on alice's link file as a site would;
# libfaketime: steps the bot's wall clock in tests/test_clock_steps_cluster.py (and the
# digest's test); slurmrestd and its JWT plugin: the clusters' REST API, which skybot's
# slurmrestd source reads; prometheus: promtool checks and unit-tests the shipped alert rules
# (tests/test_alert_rules.py); debhelper and dh-virtualenv: deploy/build-deb.sh builds the
# Debian package that tests/test_debian_package_cluster.py installs; valgrind: callgrind
# counts the ack path's instructions against bare Bolt's (benchmarks/ack_vs_bolt.py
# --instructions, its threshold).
packages=(slurm-wlm slurmdbd slurmrestd slurm-wlm-jwt-plugin munge mariadb-server sudo systemd python3-venv mmdebstrap acl
    libfaketime prometheus debhelper dh-virtualenv valgrind)

if [ "$(id -u)" -ne 0 ]; then
    echo "dev-setup: run as root (it installs packages and starts the test cluster)" >&2
    exit 1
fi

missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "dev-setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi

echo "dev-setup: installing skybot with its test tools, at the versions of the lock"
# deploy/requirements.lock pins every dependency of skybot and of its tests, with hashes, for
# the index pip is configured with here (it names none); regenerate it with
# deploy/update_lock.py. skybot itself comes after, without dependencies of its own choosing.
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    --require-hashes --no-deps -r "${repo}/deploy/requirements.lock"
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    --no-deps -e "${repo}"
# pyenv (if that is where python3 comes from) needs to learn about the new `skybot` script.
if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi

"${repo}/deploy/testcluster.sh" up

# The sudo-scoped runner and its sudoers rule, as a real install has them (the test users
# and the skybot service user exist once the cluster is up).
"${repo}/deploy/install-runner.sh"

# Slurm 24.11 (Debian 13's), the generation most sites run, in its own namespaces: no ports,
# munge or processes shared with the cluster above. Try skybot there with
# `deploy/testcluster-24.11.sh run python -m bot.cli console`.
if [ "$with_2411" -eq 1 ]; then
    "${repo}/deploy/testcluster-24.11.sh" up
fi
