# Sourced by .ci/run: makes sure a PostgreSQL server runs on a free local port and exports
# KIT_TEST_POSTGRES_URL. Uses Debian's packages; installs them when absent.
if [ -n "${KIT_TEST_POSTGRES_URL:-}" ]; then
  return 0 2>/dev/null || exit 0
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
PG_DIR=/var/tmp/kit-ci-postgres
PG_PORT_FILE="$PG_DIR/port"
pg_ready() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$1"; }
if [ -f "$PG_PORT_FILE" ] && pg_ready "$(cat "$PG_PORT_FILE")"; then
  PG_PORT=$(cat "$PG_PORT_FILE")
else
  # A free port: ask the kernel for one.
  # The first free port from 54329 (bash's /dev/tcp: nothing else to install).
  PG_PORT=54329
  while (exec 3<>"/dev/tcp/127.0.0.1/$PG_PORT") 2>/dev/null; do PG_PORT=$((PG_PORT + 1)); done
  rm -rf "$PG_DIR"
  mkdir -p "$PG_DIR"
  chown postgres:postgres "$PG_DIR"
  su postgres -c "$PG_BIN/initdb -D $PG_DIR/data -A trust -U postgres >/dev/null"
  su postgres -c "$PG_BIN/pg_ctl -D $PG_DIR/data -l $PG_DIR/log -o '-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1' -w start >/dev/null"
  echo "$PG_PORT" > "$PG_PORT_FILE"
fi
for _ in $(seq 1 30); do pg_ready "$PG_PORT" && break; sleep 1; done
psql_admin() { su postgres -c "psql -h 127.0.0.1 -p $PG_PORT -U postgres -tAqc \"$1\""; }
[ "$(psql_admin "SELECT 1 FROM pg_roles WHERE rolname='kit'")" = "1" ] ||
  psql_admin "CREATE ROLE kit LOGIN SUPERUSER PASSWORD 'kit'"
[ "$(psql_admin "SELECT 1 FROM pg_database WHERE datname='kit_test'")" = "1" ] ||
  psql_admin "CREATE DATABASE kit_test OWNER kit"
export KIT_TEST_POSTGRES_URL="postgres://kit:kit@127.0.0.1:$PG_PORT/kit_test"
