#!/usr/bin/env bash
# Starts `gradsync local` with a long ring job, SIGKILLs one of its worker
# daemons once the job runs, and writes local's exit status to DIR/rc and its
# output to DIR/out.txt (Integration.LocalStopsWhenOneOfItsWorkersDies).
# Usage: kill_a_local_worker.sh DIR BIN_DIR
set -u
dir=$1
bin=$2
timeout -k 5 90 "$bin/gradsync" local --pairs=allreduce-sync --workers 3 --epochs 100 \
  --autotune=false --compare_warmup=false --log_dir="$dir" >"$dir/out.txt" 2>&1 &
local_pid=$!
for _ in $(seq 600); do
  grep -q RUNNING "$dir/out.txt" && break
  sleep 0.1
done
worker=$(pgrep -f "gradsync-worker.*$dir/token" | head -n 1)
if [ -z "$worker" ]; then
  echo "no worker of $dir found" >"$dir/rc"
  kill "$local_pid"
  exit 1
fi
date +%s.%N >"$dir/killed_at"
kill -9 "$worker"
wait "$local_pid"
echo $? >"$dir/rc"
date +%s.%N >"$dir/ended_at"
