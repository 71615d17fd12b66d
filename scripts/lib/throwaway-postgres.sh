# shellcheck shell=bash
# A throw-away PostgreSQL for one test run: its own folder, a spare loopback port, stopped by a
# trap when the calling script exits. PostgreSQL refuses to run as root, so under root the
# server runs as the unprivileged `postgres` user.

pg_bindir() {
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$dir/initdb" ] && { echo "$dir"; return; }
  done
  command -v initdb >/dev/null && { dirname "$(command -v initdb)"; return; }
  echo "PostgreSQL is not installed: run scripts/setup (or apt-get install postgresql)" >&2
  return 1
}

as_server_user() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

spare_port() {
  local port
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
  done
  echo "no free port found" >&2
  return 1
}

start_throwaway_postgres() {
  local bindir port
  bindir=$(pg_bindir)
  port=$(spare_port)
  PG_TMP=$(mktemp -d /tmp/orderflow-test-pg.XXXXXX)
  chmod 755 "$PG_TMP"
  [ "$(id -u)" = 0 ] && chown postgres: "$PG_TMP"
  PG_DATA="$PG_TMP/data"
  trap stop_throwaway_postgres EXIT
  as_server_user "$bindir/initdb" -D "$PG_DATA" -U orderflow_test --auth=trust -E UTF8 --locale=C.UTF-8 >"$PG_TMP/initdb.log" 2>&1 \
    || { cat "$PG_TMP/initdb.log"; return 1; }
  cat >>"$PG_DATA/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 1000
CONF
  # TLS with a throw-away self-signed certificate: clients that do not say otherwise
  # (sslmode=prefer, libpq's default) then talk TLS, as they would to most real servers.
  if command -v openssl >/dev/null; then
    openssl req -new -x509 -days 2 -nodes -subj "/CN=127.0.0.1" -keyout "$PG_DATA/server.key" \
      -out "$PG_DATA/server.crt" >"$PG_TMP/openssl.log" 2>&1 || { cat "$PG_TMP/openssl.log"; return 1; }
    chmod 600 "$PG_DATA/server.key"
    [ "$(id -u)" = 0 ] && chown postgres: "$PG_DATA/server.key" "$PG_DATA/server.crt"
    echo "ssl = on" >>"$PG_DATA/postgresql.conf"
  fi
  as_server_user "$bindir/pg_ctl" -D "$PG_DATA" -l "$PG_TMP/server.log" -w -t 60 start >/dev/null \
    || { cat "$PG_TMP/server.log"; return 1; }
  PG_BINDIR=$bindir
  export ORDERFLOW_TEST_DATABASE_URL="postgresql://orderflow_test@127.0.0.1:$port/postgres?connect_timeout=30"
  echo "==> throw-away PostgreSQL on 127.0.0.1:$port ($PG_DATA)"
}

# Stops the server and exits with the script's status ($?, or the first argument when a
# caller's own trap ran commands before this).
stop_throwaway_postgres() {
  local status=${1:-$?}
  if [ -n "${PG_DATA:-}" ] && [ -f "$PG_DATA/postmaster.pid" ]; then
    as_server_user "$PG_BINDIR/pg_ctl" -D "$PG_DATA" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  [ -n "${PG_TMP:-}" ] && rm -rf "$PG_TMP"
  exit "$status"
}

# Fails when the compiler warned about our own sources (dependencies may warn about theirs).
check_build_log() {
  local ours
  ours=$(grep -E "^/.*/(Sources|Tests)/.*: (warning|error): " "$1" | grep -v "/.build/" | sort -u || true)
  if [ -n "$ours" ]; then
    echo "The build produced warnings or errors in OrderFlow's own code:" >&2
    echo "$ours" >&2
    return 1
  fi
}
