#!/usr/bin/env bash
# Throughput of GET /v1/payments/quotes/{id} on the embedded sandbox, measured with wrk.
#
#   bench/sandbox_wrk.sh                 # release build (the number that counts: >= 20,000 req/s)
#   PROFILE=dev bench/sandbox_wrk.sh     # quick look with the debug build
#
# Env: PROFILE (release|dev), DURATION (default 15s), CONNECTIONS (default 64), THREADS (2),
#      PORT (default 18181). Needs wrk on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE="${PROFILE:-release}"
DURATION="${DURATION:-15s}"
CONNECTIONS="${CONNECTIONS:-64}"
THREADS="${THREADS:-2}"
PORT="${PORT:-18181}"
INFO="$(mktemp)"
LOG="$(mktemp)"

command -v wrk >/dev/null || { echo "wrk is not installed" >&2; exit 2; }

cargo test --profile "$PROFILE" --test sandbox_serve --no-run
rm -f "$INFO"
FXPAY_SANDBOX_PORT="$PORT" FXPAY_SANDBOX_SECONDS=3600 FXPAY_SANDBOX_INFO="$INFO" \
  cargo test --profile "$PROFILE" --test sandbox_serve -- --ignored --nocapture >"$LOG" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; pkill -P "$SERVER" 2>/dev/null || true' EXIT

for _ in $(seq 1 120); do
  [ -s "$INFO" ] && break
  sleep 0.5
done
[ -s "$INFO" ] || { echo "sandbox did not start; log:" >&2; cat "$LOG" >&2; exit 1; }

field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$INFO" "$1"; }
BASE="$(field base_url)"
TOKEN="$(field payments_token)"
QUOTE="$(field quote_id)"

# Warm-up, then the measured run.
wrk -t"$THREADS" -c"$CONNECTIONS" -d2s -H "Authorization: Bearer $TOKEN" "$BASE/v1/payments/quotes/$QUOTE" >/dev/null
wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency \
  -H "Authorization: Bearer $TOKEN" "$BASE/v1/payments/quotes/$QUOTE"
