#!/usr/bin/env bash
# One order from creation to delivery over the HTTP API, with curl: the merchant's backend
# (API key) creates and advances it; the customer's app (the order's client secret) registers
# its device, hands over its push-to-start token, follows the order, reports the activity's
# update token and what it shows — every device call with the device's own credential.
# Meanwhile the event feed (Server-Sent Events) is recorded.
#
#   API=http://127.0.0.1:8080 KEY=of_live_… ORDER=1042 Examples/HTTP/end-to-end.sh
#
# Needs `orderflow serve` with its worker. Prints each step; exits non-zero at the first failure.
set -euo pipefail
: "${API:?set API, e.g. http://127.0.0.1:8080}" "${KEY:?set KEY to a merchant API key}"
ORDER=${ORDER:-1042}
PUSH_TO_START_TOKEN=${PUSH_TO_START_TOKEN:-$(printf 'a1%.0s' {1..32})}
ACTIVITY_TOKEN=${ACTIVITY_TOKEN:-$(printf 'b2%.0s' {1..32})}
EVENTS=${EVENTS:-$(mktemp)}

field() { python3 -c 'import json, sys; print(json.load(sys.stdin)'"$1"')'; }
backend() { curl -sS --fail-with-body -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' "$@"; }
app() {
  curl -sS --fail-with-body -H "Authorization: Bearer $SECRET" -H "OrderFlow-Device-Credential: ${DEVICE_CREDENTIAL:-}" \
    -H 'Content-Type: application/json' "$@"
}

# The live feed, from now on (a board or a backend keeps it open; this script stops it at the
# end, or curl after two minutes). "From now" is when the server answers: its first line.
curl -sSN --max-time 120 -H "Authorization: Bearer $KEY" "$API/v1/events" >"$EVENTS" &
feed=$!
for _ in $(seq 100); do
  grep -q '^: OrderFlow events' "$EVENTS" && break
  sleep 0.1
done

backend -X POST "$API/v1/workflows" -H 'Content-Type: application/yaml' --data-binary @workflows/food-order.yaml >/dev/null
SECRET=$(backend -X POST "$API/v1/orders" -H "Idempotency-Key: create-$ORDER" \
  -d '{"id": "'"$ORDER"'", "workflow": "food-order", "attributes": {"merchantName": "Luigi'\''s", "orderNumber": "'"$ORDER"'", "itemCount": 3}}' \
  | field '["client_secret"]')
echo "created order $ORDER; its client secret goes to the app"

# The app registers its device once (the server picks an id nobody can guess) and keeps the
# credential (the Keychain, in an app); then its push-to-start token, then it follows the order —
# the worker starts the activity.
registered=$(app -X POST "$API/v1/devices" -d '{}')
DEVICE=$(field '["device"]' <<<"$registered")
DEVICE_CREDENTIAL=$(field '["device_credential"]' <<<"$registered")
echo "registered the app's device $DEVICE"
app -X PUT "$API/v1/devices/$DEVICE/push-to-start-tokens/FoodOrderAttributes" -d '{"token": "'"$PUSH_TO_START_TOKEN"'"}' >/dev/null
app -X PUT "$API/v1/orders/$ORDER/followers/$DEVICE"
for _ in $(seq 100); do
  status=$(app "$API/v1/orders/$ORDER" | field '["activities"][0]["status"]')
  [ "$status" = starting ] && break
  sleep 0.1
done
echo "the activity was push-started ($status)"
# The activity's own update token arrives (pushTokenUpdates), and the app shows the content.
app -X PUT "$API/v1/orders/$ORDER/activities/$DEVICE/token" -d '{"token": "'"$ACTIVITY_TOKEN"'"}' >/dev/null
app -X PUT "$API/v1/orders/$ORDER/activities/$DEVICE/state" \
  -d '{"state": "active", "applied_at": "'"$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)"'"}' >/dev/null

# The backend moves the order along; each step is one push to the activity (≤ 1 per second).
for step in '{"event": "accept", "input": {"eta": "+20m"}}' '{"to": "ready"}' \
            '{"event": "dispatch", "input": {"eta": "+15m", "driver": "Sam"}}' '{"event": "deliver"}'; do
  state=$(backend -X POST "$API/v1/orders/$ORDER/advance" -d "$step" | field '["order"]["state"]')
  echo "advanced to $state"
  sleep 1.1
done

# Wait until the worker sent everything, then show what the feed carried.
for _ in $(seq 100); do
  pending=$(backend "$API/v1/orders/$ORDER" | field '["pending_updates"]')
  [ "$pending" = 0 ] && break
  sleep 0.1
done
sleep 0.6
kill "$feed" 2>/dev/null || true
wait "$feed" 2>/dev/null || true
echo "the feed carried $(grep -c '^event: transition' "$EVENTS") transitions and $(grep -c '^event: push' "$EVENTS") pushes"
echo "pushes: $(backend "$API/v1/orders/$ORDER/history" | python3 -c 'import json, sys; print(" ".join(d["event"] + ":" + d["outcome"] for d in json.load(sys.stdin)["deliveries"]))')"
