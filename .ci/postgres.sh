#!/usr/bin/env bash
# Install (if needed) and start a local PostgreSQL for the store tests; prints the DSN last.
# Needs root (apt-get, su). Listens on 127.0.0.1 only.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
ver=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -qx "$ver main"; then
  pg_createcluster "$ver" main >/dev/null
fi
port=$(pg_lsclusters -h | awk -v v="$ver" '$1==v && $2=="main" {print $3}')
pg_ctlcluster "$ver" main start 2>/dev/null || pg_ctlcluster "$ver" main status >/dev/null
as_pg() { su postgres -c "$1"; }
as_pg "psql -p $port -qtAc \"SELECT 1 FROM pg_roles WHERE rolname='intermission'\"" | grep -q 1 ||
  as_pg "psql -p $port -qc \"CREATE ROLE intermission LOGIN SUPERUSER PASSWORD 'intermission'\""
as_pg "psql -p $port -qtAc \"SELECT 1 FROM pg_database WHERE datname='intermission'\"" | grep -q 1 ||
  as_pg "createdb -p $port -O intermission intermission"
echo "postgresql://intermission:intermission@127.0.0.1:$port/intermission"
