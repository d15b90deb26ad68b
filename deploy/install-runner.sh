#!/usr/bin/env bash
# Install skybot's sudo-scoped runner and its sudoers rule. Run as root; safe to run again.
#
#   deploy/install-runner.sh            install (or refresh) both
#   PYTHON=/usr/bin/python3.11 deploy/install-runner.sh
#
# Installs
#   /usr/local/libexec/skybot-runner   root:root 0755, from deploy/skybot_runner.py
#   /etc/sudoers.d/skybot              root:root 0440, from deploy/sudoers.d/skybot
#
# The runner's first line is rewritten to "#!$PYTHON -IS". PYTHON (default /usr/bin/python3)
# must be the distribution's own interpreter: root-owned, in a root-owned directory, Python 3.9
# or newer. Never a virtualenv, pyenv or conda python: whoever can write to that tree could run
# code as every user skybot serves. -I (isolated) ignores PYTHON* variables, user
# site-packages and the current directory; -S skips site-packages altogether.
#
# The sudoers file is checked with `visudo -cf` before it is moved into place, and the rule is
# only installed if the service user and the group exist, so sudo is never left broken.
set -euo pipefail

readonly RUNNER_DEST=/usr/local/libexec/skybot-runner
readonly SUDOERS_DEST=/etc/sudoers.d/skybot
readonly SERVICE_USER=skybot
readonly USERS_GROUP=skybot-users
PYTHON=${PYTHON:-/usr/bin/python3}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src_runner=$here/skybot_runner.py
src_sudoers=$here/sudoers.d/skybot

log() { printf '[install-runner] %s\n' "$*"; }
die() { printf '[install-runner] ERROR: %s\n' "$*" >&2; exit 1; }

[[ $EUID -eq 0 ]] || die "must run as root"
[[ -f $src_runner && -f $src_sudoers ]] || die "run from a skybot checkout (missing $src_runner or $src_sudoers)"
command -v visudo >/dev/null || die "visudo not found: install sudo"

# The interpreter and every directory above it must be root-owned and not writable by others.
[[ $PYTHON == /* ]] || die "PYTHON must be an absolute path, not $PYTHON"
real_python=$(readlink -f -- "$PYTHON") || die "cannot resolve $PYTHON"
[[ -x $real_python ]] || die "$PYTHON is not an executable (set PYTHON to the system python3)"
check_root_owned() {
    local p=$1 owner mode
    [[ -L $p ]] && return 0   # a symlink's own bits mean nothing; its target is checked too
    owner=$(stat -c %u -- "$p")
    mode=$(stat -c %a -- "$p")
    [[ $owner == 0 ]] || die "$p (on the way to $PYTHON) is not owned by root"
    # Group/other write bits (the sticky /tmp would also be refused, as it should be).
    (( (8#$mode & 8#022) == 0 )) || die "$p (on the way to $PYTHON) is writable by non-root users"
}
for p in "$PYTHON" "$real_python"; do
    d=$p
    while :; do
        check_root_owned "$d"
        [[ $d == / ]] && break
        d=$(dirname -- "$d")
    done
done
"$PYTHON" -IS -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' ||
    die "$PYTHON is older than Python 3.9"
"$PYTHON" -IS -c 'import tomllib' 2>/dev/null ||
    log "note: $PYTHON has no tomllib (Python < 3.11); /etc/skybot/runner.toml cannot be used"

# Runner: write a temporary file next to the destination, then rename, so a running bot never
# sees a half-written program.
install -d -o root -g root -m 0755 "$(dirname "$RUNNER_DEST")"
tmp=$(mktemp "$RUNNER_DEST.XXXXXX")
trap 'rm -f "$tmp"' EXIT
{
    printf '#!%s -IS\n' "$PYTHON"
    tail -n +2 "$src_runner"
} >"$tmp"
head -n 1 "$src_runner" | grep -q '^#!' || die "$src_runner does not start with a #! line"
"$PYTHON" -IS -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$tmp" ||
    die "$src_runner does not parse with $PYTHON"
chown root:root "$tmp"
chmod 0755 "$tmp"
if [[ -f $RUNNER_DEST ]] && cmp -s "$tmp" "$RUNNER_DEST"; then
    rm -f "$tmp"
    chown root:root "$RUNNER_DEST"
    chmod 0755 "$RUNNER_DEST"
else
    mv -f "$tmp" "$RUNNER_DEST"
    log "installed $RUNNER_DEST (interpreter $PYTHON)"
fi
trap - EXIT

# sudoers: only when the names it refers to exist, and only after visudo accepts it.
id -u "$SERVICE_USER" >/dev/null 2>&1 || die "service user $SERVICE_USER does not exist"
getent group "$USERS_GROUP" >/dev/null || die "group $USERS_GROUP does not exist"
install -d -o root -g root -m 0755 /etc/sudoers.d
grep -q '^@includedir /etc/sudoers.d\|^#includedir /etc/sudoers.d' /etc/sudoers ||
    log "warning: /etc/sudoers does not include /etc/sudoers.d; add '@includedir /etc/sudoers.d'"
tmp=$(mktemp /etc/sudoers.d/.skybot.XXXXXX)   # a dot name: sudo ignores it until renamed
trap 'rm -f "$tmp"' EXIT
cat "$src_sudoers" >"$tmp"
chown root:root "$tmp"
chmod 0440 "$tmp"
visudo -cqf "$tmp" || die "visudo rejected $src_sudoers; nothing installed"
if [[ -f $SUDOERS_DEST ]] && cmp -s "$tmp" "$SUDOERS_DEST"; then
    rm -f "$tmp"
    chown root:root "$SUDOERS_DEST"
    chmod 0440 "$SUDOERS_DEST"
else
    mv -f "$tmp" "$SUDOERS_DEST"
    log "installed $SUDOERS_DEST"
fi
trap - EXIT
visudo -cq || die "the installed sudoers configuration does not parse (run visudo -c)"
