#!/usr/bin/env bash
# How fast a daemon starts: `gradsync-worker --help` and a worker's time to
# register with a running coordinator (from the fork to the coordinator's
# "worker ... joined" line), as medians of RUNS runs, with `true` (the cost of
# a fork and exec) and `gradsync-server --help` measured in the same run as
# the baselines. Target (issue 46): both at most 0.15 s on a 2-core machine.
#   bash bench/micro/startup.sh [BIN_DIR] [RUNS]   (default build/bin, 9)
# Prints one line per measurement and the ratios.
set -euo pipefail
BIN=${1:-build/bin}
RUNS=${2:-9}
for b in gradsync-worker gradsync-server; do
  [ -x "$BIN/$b" ] || { echo "startup: $BIN/$b not found (build first)" >&2; exit 2; }
done
DIR=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$DIR"
}
trap cleanup EXIT

now() { date +%s.%N; }
calc() { awk "BEGIN { print $* }"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
# Median seconds of RUNS runs of "$@".
timed() {
  for _ in $(seq "$RUNS"); do
    local t0; t0=$(now)
    "$@" >/dev/null 2>&1 || true
    calc "$(now) - $t0"
  done | median
}

exec_s=$(timed true)
help_s=$(timed "$BIN/gradsync-worker" --help)
server_help_s=$(timed "$BIN/gradsync-server" --help)

"$BIN/gradsync-server" --auth=none --listen=127.0.0.1:0 --state_dir="$DIR/state" \
  >"$DIR/server.out" 2>"$DIR/server.log" &
SERVER_PID=$!
for _ in $(seq 100); do
  ADDR=$(sed -n 's/^listening on //p' "$DIR/server.out")
  [ -n "$ADDR" ] && break
  sleep 0.05
done
[ -n "$ADDR" ] || { echo "startup: the server did not start" >&2; cat "$DIR/server.log" >&2; exit 1; }

# Seconds from now to the coordinator's line for worker $1 (its log stamps
# milliseconds in local time).
register_s() {
  local id=$1 t0 line stamp
  t0=$(now)
  "$BIN/gradsync-worker" --coordinator="$ADDR" --auth=none --listen=127.0.0.1:0 \
    --bulk_port=-1 --id="$id" >/dev/null 2>"$DIR/$id.log" &
  local pid=$!
  for _ in $(seq 200); do
    line=$(grep -m1 "worker $id joined" "$DIR/server.log" || true)
    [ -n "$line" ] && break
    sleep 0.02
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [ -n "$line" ] || { echo "startup: worker $id did not join" >&2; exit 1; }
  stamp=$(echo "$line" | awk '{print $1" "$2}')
  calc "$(date -d "$stamp" +%s.%N) - $t0"
}
reg_s=$(for i in $(seq "$RUNS"); do register_s "w$i"; done | median)

printf 'startup: fork+exec of true        %.3f s\n' "$exec_s"
printf 'startup: gradsync-server --help   %.3f s\n' "$server_help_s"
printf 'startup: gradsync-worker --help   %.3f s  (%.1fx the server'"'"'s)\n' "$help_s" \
  "$(calc "$help_s / $server_help_s")"
printf 'startup: worker time to register  %.3f s  (target 0.150 s: %s)\n' "$reg_s" \
  "$(if [ "$(calc "($reg_s <= 0.15 && $help_s <= 0.15) ? 1 : 0")" = 1 ]; then echo met; else echo missed; fi)"
