#!/bin/sh
# The first start makes the cluster in $PGDATA: the superuser $POSTGRES_USER with $POSTGRES_PASSWORD
# (scram-sha-256 for every connection, the container's own socket too: nothing is trusted), and the
# database $POSTGRES_DB. A start cut short between the two (stopped, killed) finishes the job on
# the next start: the database is made until the marker says it was. Later starts use what is there.
# `postgres -c …` runs the server with those options.
set -eu
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
marker="$PGDATA/.issue-agent-ready"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "postgres-entrypoint: POSTGRES_PASSWORD is required to make the cluster" >&2
    exit 1
  fi
  pwfile="$(mktemp)"
  trap 'rm -f "$pwfile"' EXIT
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=scram-sha-256 --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
fi
if [ ! -e "$marker" ]; then
  # A private server on the unix socket only, to make the database before anyone can connect.
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" -w start >/dev/null
  export PGPASSWORD="${POSTGRES_PASSWORD:-}"
  if [ -z "$(psql -h /var/run/postgresql -U "$POSTGRES_USER" -d postgres -Atc \
    "SELECT 1 FROM pg_database WHERE datname = '$(printf '%s' "$POSTGRES_DB" | sed "s/'/''/g")'")" ]; then
    createdb -h /var/run/postgresql -U "$POSTGRES_USER" -- "$POSTGRES_DB"
  fi
  unset PGPASSWORD
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  : >"$marker"
fi
if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -D "$PGDATA" -c unix_socket_directories=/var/run/postgresql "$@"
fi
exec "$@"
