# `swift test` with a time limit: a test that hangs fails the run within the limit and is named,
# instead of holding CI until its own timeout with nothing said. (Swift Testing's
# `.timeLimit` reports a test that ran too long but does not end it; a test waiting for a
# signal its failed helper never sent once left the whole run waiting with no thread busy.)
#
#   bounded_swift_test LOG [swift test arguments…]
#
# Runs `swift test --skip-build ARGUMENTS`, its output shown and written to LOG. After
# ORDERFLOW_TEST_HANG_MINUTES minutes (default 30) it stops the run, lists the tests that
# started and never finished, and returns 124. Otherwise it returns `swift test`'s status.
#
# Which tests started and ended comes from Swift Testing's event stream (JSON lines, one per
# event; the console leaves out many passing tests), written beside LOG when the toolchain
# offers it.

bounded_swift_test() {
  local log=$1
  shift
  local minutes=${ORDERFLOW_TEST_HANG_MINUTES:-30}
  local events="${log%.log}.events.jsonl"
  rm -f "$events"
  local stream=()
  if swift_test_has_event_stream; then
    stream=(--experimental-event-stream-output "$events" --experimental-event-stream-version 0)
  fi
  bash -c 'set -o pipefail; log=$1; shift; swift test --skip-build "$@" 2>&1 | tee "$log"' \
    bounded "$log" "$@" "${stream[@]}" &
  local run=$!
  local deadline=$((SECONDS + minutes * 60))
  while kill -0 "$run" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      {
        echo "==> the tests were still running after $minutes min: stopped."
        if [ -s "$events" ]; then
          echo "    Started and never finished (the hung ones among them):"
          unfinished_tests "$events" | sed 's/^/      /'
        else
          echo "    The last lines of the run are above; its whole output is in $log."
        fi
        echo "    (ORDERFLOW_TEST_HANG_MINUTES sets the limit.)"
      } >&2
      # The whole run: swift test starts the test binary in a process group of its own.
      local pids
      pids="$run $(descendants "$run")"
      kill -TERM $pids 2>/dev/null || true
      sleep 5
      kill -KILL $pids 2>/dev/null || true
      wait "$run" 2>/dev/null || true
      return 124
    fi
    sleep 1
  done
  wait "$run"
}

descendants() {
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}

# Whether this toolchain's `swift test` writes Swift Testing's event stream (an experimental
# option in Swift 6): asked once, by a run that selects no test.
swift_test_has_event_stream() {
  if [ -z "${ORDERFLOW_EVENT_STREAM:-}" ]; then
    local probe
    probe=$(mktemp)
    if swift test --skip-build --filter '^$' --experimental-event-stream-output "$probe" \
         --experimental-event-stream-version 0 >/dev/null 2>&1; then
      ORDERFLOW_EVENT_STREAM=yes
    else
      ORDERFLOW_EVENT_STREAM=no
    fi
    rm -f "$probe"
  fi
  [ "$ORDERFLOW_EVENT_STREAM" = yes ]
}

# The tests (not suites) of an event stream that started and never ended, in the order they
# started, each with where it is written.
unfinished_tests() {
  python3 - "$1" <<'PYTHON'
import json, sys
functions, started, ended = {}, [], set()
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        record = json.loads(line)
    except ValueError:
        continue  # the line being written when the run was stopped
    payload = record.get("payload", {})
    if record.get("kind") == "test" and payload.get("kind") == "function":
        location = payload.get("sourceLocation", {})
        functions[payload["id"]] = f'{payload.get("displayName") or payload.get("name")} ({location.get("fileID")}:{location.get("line")})'
    elif record.get("kind") == "event" and payload.get("kind") == "testStarted":
        started.append(payload.get("testID"))
    elif record.get("kind") == "event" and payload.get("kind") == "testEnded":
        ended.add(payload.get("testID"))
for test in started:
    if test in functions and test not in ended:
        print(functions[test])
PYTHON
}
