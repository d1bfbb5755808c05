#!/bin/sh
# The optional read replica (docker-compose.yml, profile "replica"): on its first start it copies
# the primary with pg_basebackup -R (which also writes the settings that make it stream from the
# primary from then on), then runs as a hot standby. Later starts find the copy and only stream.
set -eu
if [ ! -s "${PGDATA}/PG_VERSION" ]; then
  mkdir -p "${PGDATA}"
  chown postgres:postgres "${PGDATA}"
  chmod 700 "${PGDATA}"
  until su-exec postgres pg_basebackup -h postgres -U "${POSTGRES_USER}" -D "${PGDATA}" -R -X stream; do
    echo "postgres-replica: the primary does not let us copy it yet; trying again in 5 s" >&2
    rm -rf "${PGDATA:?}"/*
    sleep 5
  done
fi
exec su-exec postgres postgres -c hot_standby=on
