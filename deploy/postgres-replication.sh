#!/bin/sh
# Run once by the postgres image when it makes a new database (/docker-entrypoint-initdb.d): lets
# streaming replicas (the optional postgres-replica service, docker-compose.yml) connect as the
# database user, with the same password authentication as every other connection. The image's own
# rule ("host all all all") does not cover replication connections.
set -eu
echo "host replication ${POSTGRES_USER} all scram-sha-256" >> "${PGDATA}/pg_hba.conf"
