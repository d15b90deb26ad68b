#!/usr/bin/env bash
# Build skybot's Debian package from this checkout:
#
#   deploy/build-deb.sh [OUTPUT_DIR]        (default: dist/) -> OUTPUT_DIR/skybot_VERSION_ARCH.deb
#
# Needs Debian's debhelper and dh-virtualenv (deploy/dev-setup.sh installs them), git, and a
# package index for pip: the venv gets the product's part of deploy/requirements.lock, by hash,
# from the index pip is configured with on this machine (no index is named in the checkout).
# The build runs in a scratch copy of the checkout (committed and uncommitted files, and git
# for the version), so the checkout is not written to and no leftover of an earlier build gets in.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
output=$(mkdir -p "${1:-$repo/dist}" && cd "${1:-$repo/dist}" && pwd)

for tool in dpkg-buildpackage dh_virtualenv git; do
    if ! command -v "$tool" >/dev/null; then
        echo "build-deb: $tool is missing: apt-get install debhelper dh-virtualenv git" >&2
        exit 1
    fi
done
if [ -n "${PIP_NO_INDEX:-}" ] || python3 -m pip config list 2>/dev/null | grep -q "no-index='\(1\|true\|yes\|on\)'"; then
    echo "build-deb: pip is configured with no package index (no-index): the venv needs one;" \
        "configure it in pip.conf (pip config set global.index-url URL)" >&2
    exit 1
fi

version=$(cd "$repo" && python3 -c 'import versioningit; print(versioningit.get_version("."))')
scratch=$(mktemp -d "${TMPDIR:-/tmp}/skybot-deb.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/skybot"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard \
    | tar --null --files-from=- --ignore-failed-read -cf - .git) | tar -x -C "$scratch/skybot"

cat >"$scratch/skybot/debian/changelog" <<CHANGELOG
skybot ($version) unstable; urgency=medium

  * Built by deploy/build-deb.sh from commit $(git -C "$repo" rev-parse --short HEAD).

 -- skybot developers <dev@skybot.invalid>  $(date -R)
CHANGELOG

(cd "$scratch/skybot" && dpkg-buildpackage --build=binary --no-sign >"$scratch/build.log" 2>&1) || {
    tail -40 "$scratch/build.log" >&2
    echo "build-deb: dpkg-buildpackage failed (the end of its log is above)" >&2
    exit 1
}
deb=$(cd "$scratch" && ls skybot_*.deb)
mv "$scratch/$deb" "$output/"
echo "$output/$deb"
