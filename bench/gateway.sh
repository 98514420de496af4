#!/usr/bin/env bash
# Throughput and p99 of GET and EVALSHA through the redis-rest gateway
# (wrk, HTTP/1.1 keep-alive, POST / with a JSON command, as the worker sends
# it) beside redis-benchmark straight to the same redis-server. Starts its
# own redis-server and gateway on free loopback ports and stops them on exit.
#
#   bench/gateway.sh            # 10 s per wrk run, 50 connections
#   DURATION=5 CONNECTIONS=20 bench/gateway.sh
#
# Needs: redis-server, redis-benchmark, wrk (`apt-get install -y wrk`),
# python3 (free port), cargo. Builds redis-rest with the release-native
# profile (honours CARGO_TARGET_DIR).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DURATION="${DURATION:-10}"
CONNECTIONS="${CONNECTIONS:-50}"
WRK_THREADS="${WRK_THREADS:-1}"
REQUESTS="${REQUESTS:-200000}"
TOKEN="bench-$$-$RANDOM"
KEY="bench:key"
SCRIPT="return redis.call('GET', KEYS[1])"

for tool in redis-server redis-benchmark redis-cli wrk python3 cargo; do
  command -v "$tool" >/dev/null || { echo "error: $tool not found" >&2; exit 1; }
done

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
echo "==> building redis-rest (release-native)" >&2
(cd "$ROOT" && cargo build --quiet --profile release-native -p redis-rest)
BIN="$TARGET_DIR/release-native/redis-rest"

WORK="$(mktemp -d -t qg-bench-gateway-XXXXXX)"
REDIS_PID=""
GATEWAY_PID=""
cleanup() {
  [ -n "$GATEWAY_PID" ] && kill "$GATEWAY_PID" 2>/dev/null || true
  [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Polls a command every 20 ms until it succeeds or $1 seconds pass.
wait_for() {
  local seconds="$1"; shift
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.02
  done
}

# redis-server on a free port (retry on a clash).
for _ in 1 2 3 4 5; do
  REDIS_PORT="$(free_port)"
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$WORK" --logfile "$WORK/redis.log" &
  REDIS_PID=$!
  if wait_for 10 redis-cli -p "$REDIS_PORT" ping && kill -0 "$REDIS_PID" 2>/dev/null; then
    break
  fi
  kill "$REDIS_PID" 2>/dev/null || true
  REDIS_PID=""
done
[ -n "$REDIS_PID" ] || { echo "error: redis-server did not start" >&2; exit 1; }

# The gateway binds port 0 and prints the port it got.
REDIS_REST_TOKEN="$TOKEN" RUST_LOG=warn "$BIN" --listen 127.0.0.1:0 \
  --redis-url "redis://127.0.0.1:$REDIS_PORT" >"$WORK/gateway.out" 2>"$WORK/gateway.err" &
GATEWAY_PID=$!
wait_for 20 grep -q "listening on http://" "$WORK/gateway.out" \
  || { echo "error: redis-rest did not start:" >&2; cat "$WORK/gateway.err" >&2; exit 1; }
URL="$(sed -n 's/^redis-rest listening on //p' "$WORK/gateway.out")"

redis-cli -p "$REDIS_PORT" set "$KEY" xxx >/dev/null
SHA="$(redis-cli -p "$REDIS_PORT" script load "$SCRIPT")"

# wrk: POST a fixed JSON body; done() prints "rps p99_ms" for the table.
wrk_lua() {
  cat >"$WORK/$1.lua" <<EOF
wrk.method = "POST"
wrk.body = '$2'
wrk.headers["Authorization"] = "Bearer $TOKEN"
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests)
  local failed = summary.errors.status + summary.errors.connect + summary.errors.read
    + summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT %.0f %.3f %d %d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(99) / 1000,
    summary.requests, failed))
end
EOF
}
wrk_lua get '["GET","'"$KEY"'"]'
wrk_lua evalsha '["EVALSHA","'"$SHA"'","1","'"$KEY"'"]'

# A correctness probe before measuring: both bodies must answer "xxx".
for body in '["GET","'"$KEY"'"]' '["EVALSHA","'"$SHA"'","1","'"$KEY"'"]'; do
  reply="$(python3 - "$URL" "$TOKEN" "$body" <<'EOF'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/", data=sys.argv[3].encode(),
    headers={"Authorization": "Bearer " + sys.argv[2]})
print(urllib.request.urlopen(req, timeout=5).read().decode())
EOF
)"
  [ "$reply" = '{"result":"xxx"}' ] || { echo "error: $body -> $reply" >&2; exit 1; }
done

run_wrk() {
  # 1 s warm-up, then the measured run.
  wrk -t "$WRK_THREADS" -c "$CONNECTIONS" -d 1s -s "$WORK/$1.lua" "$URL/" >/dev/null
  wrk -t "$WRK_THREADS" -c "$CONNECTIONS" -d "${DURATION}s" -s "$WORK/$1.lua" "$URL/" \
    | awk '/^RESULT/ {print $2, $3, $4, $5}'
}

# redis-benchmark --csv: "test","rps","avg","min","p50","p95","p99","max".
run_rb() {
  redis-benchmark -p "$REDIS_PORT" -c "$CONNECTIONS" -n "$REQUESTS" --csv "$@" \
    | awk -F'","' 'NR==2 {gsub(/"/, "", $7); print $2, $7}'
}

echo "==> wrk GET via gateway (${DURATION}s, ${CONNECTIONS} connections)" >&2
read -r GW_GET_RPS GW_GET_P99 GW_GET_N GW_GET_ERR < <(run_wrk get)
echo "==> wrk EVALSHA via gateway" >&2
read -r GW_EVAL_RPS GW_EVAL_P99 GW_EVAL_N GW_EVAL_ERR < <(run_wrk evalsha)
echo "==> redis-benchmark GET ($REQUESTS requests)" >&2
read -r RB_GET_RPS RB_GET_P99 < <(run_rb -t get)
echo "==> redis-benchmark EVALSHA" >&2
read -r RB_EVAL_RPS RB_EVAL_P99 < <(run_rb EVALSHA "$SHA" 1 "$KEY")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

cat <<EOF

machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
redis-server $(redis-server --version | awk '{print $3}' | cut -d= -f2), wrk -t$WRK_THREADS -c$CONNECTIONS -d${DURATION}s, redis-benchmark -c$CONNECTIONS -n$REQUESTS (no pipelining)

| command | path | requests/s | p99 (ms) |
|---|---|---:|---:|
| GET | redis-benchmark → redis | $RB_GET_RPS | $RB_GET_P99 |
| GET | wrk → redis-rest → redis | $GW_GET_RPS | $GW_GET_P99 |
| EVALSHA | redis-benchmark → redis | $RB_EVAL_RPS | $RB_EVAL_P99 |
| EVALSHA | wrk → redis-rest → redis | $GW_EVAL_RPS | $GW_EVAL_P99 |

gateway / direct throughput: GET $(ratio "$GW_GET_RPS" "$RB_GET_RPS"), EVALSHA $(ratio "$GW_EVAL_RPS" "$RB_EVAL_RPS")
gateway requests: GET $GW_GET_N ($GW_GET_ERR failed), EVALSHA $GW_EVAL_N ($GW_EVAL_ERR failed)
EOF
