#!/bin/bash
# serve-model's load figures (docs/serving.md, issue 46's must-holds), on loopback only:
#   1. throughput and p50/p90/p99 latency per concurrency level, without dynamic batching and with
#      it under each policy, timeout and eager (medians of REPEAT runs);
#   2. soak: 100,000 requests, the server's VmRSS after 10,000 and after 100,000;
#   3. 200 malformed requests, then /healthz;
#   4. reload under load: 20,000 requests while the served file is replaced (rename) and reloaded 10 times;
#   compare (not in all): 16 clients, 20,000 requests (rows per run from /metrics), then 1 client,
#      2,000 requests; no batching / timeout / eager alternated, one server per run, REPEAT rounds (on a shared machine, alternating spreads the load's drift over
#      all three; take each configuration's median).
# Every server it starts is stopped (SIGTERM; its exit status is checked). Usage, from the repository
# root after building serve-model and serve_load:
#   tests/bench/serve_load/serve_bench.sh [all|levels|soak|malformed|reload|compare]
# Environment: BIN (build/bin), MODEL (models/cnn.onnx; served as "cnn", input "image"), PORT (18080),
# REPEAT (3), BATCH_FLAGS (eager, for soak and reload: "--max-batch 32 --batch-policy eager"),
# TIMEOUT_FLAGS ("--max-batch 32 --batch-policy timeout --max-delay-ms 2").
set -u
BIN=${BIN:-build/bin}
MODEL=${MODEL:-models/cnn.onnx}
PORT=${PORT:-18080}
REPEAT=${REPEAT:-3}
BATCH_FLAGS=${BATCH_FLAGS:---max-batch 32 --batch-policy eager}
TIMEOUT_FLAGS=${TIMEOUT_FLAGS:---max-batch 32 --batch-policy timeout --max-delay-ms 2}
WORK=$(mktemp -d /tmp/serve_bench.XXXXXX)
SERVER=""
STATUS=0

start_server() {  # start_server MODEL_FILE FLAGS...
  local file=$1
  shift
  # A fresh log per server: the previous one's "listening" line must not be mistaken for this one's.
  LOG="$WORK/server.$RANDOM.log"
  : >"$LOG"
  "$BIN/serve-model" "cnn=$file" --port "$PORT" "$@" 2>>"$LOG" &
  SERVER=$!
  for _ in $(seq 200); do
    grep "listening on" "$LOG" && return 0
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.05
  done
  cat "$LOG"
  exit 1
}

stop_server() {
  [ -n "$SERVER" ] || return 0
  kill -TERM "$SERVER" 2>/dev/null
  wait "$SERVER"
  local rc=$?
  SERVER=""
  [ $rc -eq 0 ] || { echo "serve-model exited $rc"; STATUS=1; }
}

cleanup() {
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT

load() {  # load ARGS...: serve_load against the running server; a failure marks the run failed
  "$BIN/serve_load" --port "$PORT" --max-seconds 600 "$@" || STATUS=1
}

levels() {
  for config in "no batching|" "batching, timeout|$TIMEOUT_FLAGS" "batching, eager|$BATCH_FLAGS"; do
    echo "== ${config%%|*} (${config#*|})"
    # shellcheck disable=SC2086
    start_server "$MODEL" ${config#*|}
    # Concurrency 1 under the timeout policy waits --max-delay-ms per request: fewer requests there.
    load --concurrency 1 --requests 2000 --repeat "$REPEAT"
    load --concurrency 4,16,32 --requests 20000 --repeat "$REPEAT"
    stop_server
  done
}

mean_batch() {  # rows per run so far, from /metrics (curl, when installed)
  command -v curl >/dev/null || return 0
  curl -s "http://127.0.0.1:$PORT/metrics" |
    awk '/^whittle_batch_rows_sum/ {r = $2} /^whittle_batch_rows_count/ {n = $2}
         END {if (n > 0) printf "  runs %d, rows %d, mean batch %.2f rows\n", n, r, r / n}'
}

compare() {
  for round in $(seq "$REPEAT"); do
    for config in "no batching|" "batching, timeout|$TIMEOUT_FLAGS" "batching, eager|$BATCH_FLAGS"; do
      echo "== round $round, ${config%%|*} (${config#*|}), $(cut -d' ' -f1-3 /proc/loadavg) load"
      # shellcheck disable=SC2086
      start_server "$MODEL" ${config#*|}
      load --concurrency 16 --requests 20000 --repeat 1
      mean_batch
      load --concurrency 1 --requests 2000 --repeat 1
      stop_server
    done
  done
}

soak() {
  for config in "no batching|" "batching|$BATCH_FLAGS"; do
    echo "== soak, ${config%%|*}"
    # shellcheck disable=SC2086
    start_server "$MODEL" ${config#*|}
    load --concurrency 16 --requests 100000 --rss-pid "$SERVER" --rss-at 10000,100000
    stop_server
  done
}

malformed() {
  echo "== 200 malformed requests (server --max-body-mb 64; bodies of 100 MB)"
  start_server "$MODEL"
  load --requests 0 --malformed 200 --big-body-mb 100
  stop_server
}

reload() {
  echo "== reload under load: 10 reloads during 20,000 requests at 16 clients"
  cp "$MODEL" "$WORK/served.onnx"
  # shellcheck disable=SC2086
  start_server "$WORK/served.onnx" $BATCH_FLAGS
  load --concurrency 16 --requests 20000 --reloads 10 --reload-src "$MODEL" --reload-dst "$WORK/served.onnx"
  stop_server
}

what=${1:-all}
echo "serve_bench: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null)"
case $what in
  levels) levels ;;
  soak) soak ;;
  malformed) malformed ;;
  reload) reload ;;
  compare) compare ;;
  all) levels; soak; malformed; reload ;;
  *) echo "usage: $0 [all|levels|soak|malformed|reload|compare]"; exit 2 ;;
esac
exit $STATUS
