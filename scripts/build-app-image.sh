#!/usr/bin/env bash
# Builds the production image (Dockerfile at the root) as issue-agent/app:<version> and :latest,
# offline apart from the npm registry: the base and Node images come from scripts/build-images.sh.
# With `services` (or no argument): also issue-agent/redis and issue-agent/postgres (deploy/), from
# the same Debian root, for compose.yaml where no image registry is reachable.
#
# Usage: scripts/build-app-image.sh [app] [services]
#
# Env: ISSUE_AGENT_EXTRA_CA_CERTS (or NODE_EXTRA_CA_CERTS): a PEM bundle the build's npm must trust
#      (a TLS-inspecting proxy); it reaches the build stage only, never the image.
#      BASE_IMAGE, NODE_IMAGE: build arguments (defaults in the Dockerfile).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

die() {
  echo "build-app-image: $*" >&2
  exit 1
}

for image in "${BASE_IMAGE:-issue-agent/base-raw:latest}" "${NODE_IMAGE:-issue-agent/node:24}"; do
  docker image inspect "$image" >/dev/null 2>&1 || die "$image is missing: run scripts/build-images.sh first"
done

ca="${ISSUE_AGENT_EXTRA_CA_CERTS:-${NODE_EXTRA_CA_CERTS:-}}"
rm -f .extra-ca.pem
trap 'rm -f "$ROOT/.extra-ca.pem"' EXIT
if [ -n "$ca" ]; then
  [ -r "$ca" ] || die "cannot read the CA bundle $ca"
  cp "$ca" .extra-ca.pem
fi

want_app=0
want_services=0
for arg in "$@"; do
  case "$arg" in
    app) want_app=1 ;;
    services) want_services=1 ;;
    *) die "usage: $0 [app] [services]" ;;
  esac
done
if [ "$#" -eq 0 ]; then
  want_app=1
  want_services=1
fi

base_args=()
[ -n "${BASE_IMAGE:-}" ] && base_args+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
if [ "$want_services" -eq 1 ]; then
  for service in redis postgres; do
    DOCKER_BUILDKIT=0 docker build --network host --pull=false --quiet "${base_args[@]}" \
      -t "issue-agent/$service:latest" "deploy/$service" >/dev/null
    echo "build-app-image: issue-agent/$service:latest"
  done
fi
if [ "$want_app" -eq 1 ]; then
  version="$(node -p "require('./package.json').version")"
  args=(--network host -t "issue-agent/app:$version" -t issue-agent/app:latest "${base_args[@]}")
  [ -n "${NODE_IMAGE:-}" ] && args+=(--build-arg "NODE_IMAGE=$NODE_IMAGE")
  docker build "${args[@]}" .
  echo "build-app-image: issue-agent/app:$version"
fi
