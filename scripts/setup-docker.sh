#!/usr/bin/env bash
# Idempotent: installs docker.io if missing, starts a local dockerd without a bridge network if none
# answers, and waits (bounded) until `docker info` answers. Exits non-zero with a message otherwise.
#
# The engine is started with --bridge=none --iptables=false --ip-masq=false: on these machines no
# container may get a private-range address, so sandboxes run with NetworkMode none and image builds
# use the host network.
set -euo pipefail

LOG_FILE="${DOCKERD_LOG:-/var/log/dockerd-issue-agent.log}"
WAIT_SECONDS="${DOCKERD_WAIT_SECONDS:-60}"

die() {
  echo "setup-docker: $*" >&2
  exit 1
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    die "need root to run: $*"
  fi
}

engine_answers() {
  timeout 10 docker info >/dev/null 2>&1
}

if command -v docker >/dev/null 2>&1 && engine_answers; then
  echo "setup-docker: engine already answers"
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  echo "setup-docker: installing docker.io"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq || die "apt-get update failed"
  as_root apt-get install -y -qq docker.io >/dev/null || die "apt-get install docker.io failed"
fi
command -v dockerd >/dev/null 2>&1 || die "dockerd not found after installing docker.io"
command -v docker >/dev/null 2>&1 || die "docker CLI not found after installing docker.io"

if ! pgrep -x dockerd >/dev/null 2>&1; then
  echo "setup-docker: starting dockerd (log: $LOG_FILE)"
  as_root mkdir -p "$(dirname "$LOG_FILE")"
  # setsid + nohup: the daemon must outlive this script and the shell that ran it.
  as_root setsid nohup dockerd --bridge=none --iptables=false --ip-masq=false >>"$LOG_FILE" 2>&1 </dev/null &
fi

deadline=$((SECONDS + WAIT_SECONDS))
until engine_answers; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "setup-docker: last lines of $LOG_FILE:" >&2
    tail -n 20 "$LOG_FILE" >&2 2>/dev/null || true
    die "docker engine did not answer within ${WAIT_SECONDS}s"
  fi
  sleep 0.5
done
echo "setup-docker: engine ready ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo unknown))"
