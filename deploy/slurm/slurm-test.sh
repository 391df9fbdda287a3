#!/usr/bin/env bash
# deploy/slurm/gradsync.sbatch on a real, private one-node Slurm cluster
# (deploy/slurm/README.md), end to end:
#   1. in a new temporary directory: a munge key and a munged on a socket of
#      its own; slurm.conf from slurm-test.conf.in (free ports, 4 CPUs,
#      proctrack/linuxproc, no accounting); slurmctld and slurmd in the
#      foreground (-D), found through SLURM_CONF; waits until the node is idle;
#   2. sbatch --ntasks=4, polled until the job ends: a ps-sync job on 2 PS shards
#      (GRADSYNC_PS_SHARDS=2, --results=ps.json) and an allreduce-sync job (the
#      default results file); each must exit 0 and its results file say
#      SUCCEEDED with 4 workers;
#   3. a job that cannot be submitted (--strategy=bogus) must fail the batch
#      job, and leave no daemon and no token behind;
#   4. GPU binding on 4 stand-in GPUs (slurm-test-gres.conf): with
#      --gres=gpu:4 task t's worker gets --gpu=t, with --gpus-per-task=1 each
#      worker one GPU of its own as --gpu=0 (the workers then refuse to start,
#      there being no GPU; nothing may be left behind);
#   5. a long allreduce job, scancel'ed while it trains: its private directory is
#      mode 700 with a mode-600 token while it runs; afterwards the teardown has
#      run, the token is gone and no gradsync-server or gradsync-worker of the
#      test is left;
#   6. always (trap): cancels what is left, stops exactly the slurmd,
#      slurmctld and munged it started (by PID) and removes the directory;
#      prints the daemons' and jobs' logs when a check failed.
# Exit 0 when every check passed; 1 otherwise. Where the daemons cannot be
# had (not root, slurm-wlm/munge missing, a daemon does not come up) it
# prints one line "SKIPPED: slurm-test: <reason>" and exits 0.
# About 1 minute on 2 cores. Environment: GRADSYNC_BIN (default build/bin).
set -Eeuo pipefail   # -E: the ERR trap names the failing line in functions too
cd "$(dirname "$0")/../.."
REPO=$PWD
export GRADSYNC_BIN=${GRADSYNC_BIN:-$REPO/build/bin}
SBATCH_SCRIPT=$REPO/deploy/slurm/gradsync.sbatch
JOB_ARGS=(--epochs=1 --train_limit=1024 --quiet)
T=""               # the temporary directory
MUNGED_PID="" CTLD_PID="" SLURMD_PID=""
SKIPPING=0
START=$SECONDS
# A Slurm job of the caller's must not leak into ours.
unset "${!SLURM_@}"

log() { echo "slurm-test: [$((SECONDS - START))s] $*"; }
fail() { echo "slurm-test: FAIL: $*" >&2; exit 1; }
skip() {
  SKIPPING=1
  echo "======================================================================"
  echo "SKIPPED: slurm-test: $*"
  echo "======================================================================"
  exit 0
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The gradsync daemons of this test: their command lines name its directory.
our_daemons() { pgrep -f "^[^ ]*bin/gradsync-(server|worker) .*$T/submit/" || true; }

# --- 1. munged, slurmctld, slurmd ----------------------------------------------
need_tools() {
  local t missing=""
  for t in munged munge slurmctld slurmd sbatch squeue scancel scontrol sinfo srun python3; do
    command -v "$t" >/dev/null || missing="$missing $t"
  done
  [ -z "$missing" ] \
    || skip "missing:$missing (bash deploy/install-deps.sh installs slurm-wlm and munge)"
  [ "$(id -u)" -eq 0 ] || skip "needs root (slurmd runs the jobs as their users)"
  local b
  for b in gradsync gradsync-server gradsync-worker; do
    [ -x "$GRADSYNC_BIN/$b" ] || { echo "slurm-test: $GRADSYNC_BIN/$b missing: run the" \
      "README's first command (deploy/build.sh) first" >&2; exit 1; }
  done
}

start_munged() {
  # munged wants its socket's directories searchable by all, its key private.
  mkdir -m 755 "$T/munge"
  mkdir -m 700 "$T/munge-key"
  head -c 1024 /dev/urandom >"$T/munge-key/munge.key"
  chmod 600 "$T/munge-key/munge.key"
  munged --foreground --socket="$T/munge/munge.socket" \
    --key-file="$T/munge-key/munge.key" --pid-file="$T/munge-key/munged.pid" \
    --seed-file="$T/munge-key/munged.seed" --log-file="$T/log/munged.log" \
    >>"$T/log/munged.out" 2>&1 &
  MUNGED_PID=$!
  for _ in $(seq 50); do
    munge --socket="$T/munge/munge.socket" --no-input >/dev/null 2>&1 && {
      log "munged pid $MUNGED_PID"; return; }
    kill -0 "$MUNGED_PID" 2>/dev/null || break
    sleep 0.2
  done
  skip "munged did not come up: $(tail -qn1 "$T/log/munged.out" "$T/log/munged.log" \
    2>/dev/null | tr '\n' ' ')"
}

start_slurm() {
  mkdir -p "$T/state" "$T/spool"
  sed -e "s|@DIR@|$T|g" -e "s|@HOST@|$(hostname -s)|g" \
      -e "s|@CTLD_PORT@|$(free_port)|g" -e "s|@SLURMD_PORT@|$(free_port)|g" \
      deploy/slurm/slurm-test.conf.in >"$T/slurm.conf"
  cp deploy/slurm/slurm-test-gres.conf "$T/gres.conf"
  export SLURM_CONF=$T/slurm.conf
  slurmctld -D -f "$SLURM_CONF" >"$T/log/slurmctld.out" 2>&1 &
  CTLD_PID=$!
  slurmd -D -f "$SLURM_CONF" >"$T/log/slurmd.out" 2>&1 &
  SLURMD_PID=$!
  local state=""
  for _ in $(seq 60); do
    state=$(sinfo --noheader --format=%T 2>/dev/null || true)
    if [ "$state" = idle ]; then
      log "slurmctld pid $CTLD_PID, slurmd pid $SLURMD_PID: node $(hostname -s) idle"
      return
    fi
    kill -0 "$CTLD_PID" 2>/dev/null || skip "slurmctld exited: $(tail -1 "$T/log/slurmctld.out")"
    kill -0 "$SLURMD_PID" 2>/dev/null || skip "slurmd exited: $(tail -1 "$T/log/slurmd.out")"
    sleep 1
  done
  print_logs
  skip "the node is not idle after 60 s (sinfo: ${state:-no answer})"
}

# --- 2.-5. jobs ----------------------------------------------------------------
# wait_job ID SECONDS: until Slurm lists job ID no more (true), or SECONDS pass.
wait_job() {
  local deadline=$((SECONDS + $2))
  while [ "$SECONDS" -lt "$deadline" ]; do
    squeue --noheader --jobs="$1" 2>/dev/null | grep -q . || return 0
    sleep 0.5
  done
  return 1
}

# run_job NAME [VAR=VALUE | --SBATCH_OPTION]... -- ARGS...: gradsync.sbatch
# ARGS on 4 tasks with those variables and sbatch options, from $T/submit,
# until it ends (polled: sbatch --wait checks only every few seconds); sets
# JOB_ID and JOB_RC, the batch script's exit status.
run_job() {
  local name=$1 envs=() opts=()
  shift
  while [ "$1" != -- ]; do
    case "$1" in --*) opts+=("$1") ;; *) envs+=("$1") ;; esac
    shift
  done
  shift
  JOB_ID=$(cd "$T/submit" && env "${envs[@]}" sbatch --parsable --ntasks=4 "${opts[@]}" \
             --output="$name.out" --job-name="gradsync-$name" "$SBATCH_SCRIPT" "$@")
  wait_job "$JOB_ID" 300 || fail "job $name (Slurm job $JOB_ID) still runs after 300 s"
  JOB_RC=$(scontrol show job "$JOB_ID" | grep -o ' ExitCode=[0-9]*' | cut -d= -f2)
  log "job $name (Slurm job $JOB_ID): exit ${JOB_RC:=unknown}"
}

# check_results FILE STRATEGY SHARDS: the results file of a SUCCEEDED job on 4 workers.
check_results() {
  [ -s "$1" ] || fail "no results file $1"
  python3 -c '
import json, sys
path, strategy, shards = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = json.load(open(path))
want = {"state": "SUCCEEDED", "strategy": strategy, "workers": 4}
if strategy == "ps":
    want["ps_shards"] = shards
bad = {k: r.get(k) for k in want if r.get(k) != want[k]}
if bad:
    sys.exit("%s: want %s, has %s (error: %s)" % (path, want, bad, r.get("error")))
print("%s: %s-%s SUCCEEDED on %d workers, %d steps, test accuracy %s" % (
    path, r["strategy"], r["mode"], r["workers"], r["steps"], r["test_accuracy"]))
' "$@" || fail "results $1"
}

# no_daemons_left WHAT: none of the test's gradsync daemons within 10 s.
no_daemons_left() {
  local left
  for _ in $(seq 50); do
    left=$(our_daemons)
    [ -z "$left" ] && return 0
    sleep 0.2
  done
  # shellcheck disable=SC2086  # left is a list of PIDs
  ps -o pid,args -p $left >&2 || true
  fail "$1: gradsync daemons left behind (pids $(tr '\n' ' ' <<<"$left"))"
}

job_ps_and_ring() {
  run_job ps GRADSYNC_PS_SHARDS=2 -- --strategy=ps --mode=sync "${JOB_ARGS[@]}" --results=ps.json
  [ "$JOB_RC" -eq 0 ] || fail "the ps job's batch script exited $JOB_RC"
  check_results "$T/submit/ps.json" ps 2
  grep -q 'PS shards 1..1: ' "$T/submit/ps.out" || fail "no extra PS shard started"
  run_job allreduce -- --strategy=allreduce --mode=sync "${JOB_ARGS[@]}"
  [ "$JOB_RC" -eq 0 ] || fail "the allreduce job's batch script exited $JOB_RC"
  check_results "$T/submit/gradsync-$JOB_ID.json" allreduce 1
  [ ! -e "$T/submit/.gradsync-$JOB_ID" ] || fail "a successful job left its private directory"
  no_daemons_left "after the allreduce job"
}

job_that_fails() {
  run_job bad -- --strategy=bogus "${JOB_ARGS[@]}"
  [ "$JOB_RC" -ne 0 ] || fail "a job with --strategy=bogus did not fail its batch job"
  grep -q 'FAILED (exit' "$T/submit/bad.out" || fail "the failed job printed no FAILED line"
  [ ! -e "$T/submit/.gradsync-$JOB_ID/token" ] || fail "the failed job left its token"
  no_daemons_left "after the failed job"
  log "a job that cannot be submitted failed its batch job and cleaned up"
}

# gpu_binding: jobs on the stand-in GPUs. With --gres=gpu:4 every task sees
# all four and task t's worker must get --gpu=t; with --gpus-per-task=1 each
# task sees one GPU of its own and its worker gets --gpu=0. The workers refuse
# --gpu where no GPU is, so the jobs may fail; they must leave nothing behind.
gpu_binding() {
  local t line seen=""
  run_job gpu-all GRADSYNC_KEEP_LOGS=1 --gres=gpu:4 -- --strategy=allreduce "${JOB_ARGS[@]}"
  for t in 0 1 2 3; do
    line=$(head -1 "$T/submit/.gradsync-$JOB_ID/worker-$t.log" 2>/dev/null || true)
    [[ $line == *": CUDA_VISIBLE_DEVICES=0,1,2,3 --gpu=$t" ]] \
      || fail "--gres=gpu:4: task $t's worker started as '$line'"
  done
  no_daemons_left "after the --gres=gpu:4 job"
  run_job gpu-task GRADSYNC_KEEP_LOGS=1 --gpus-per-task=1 -- --strategy=allreduce "${JOB_ARGS[@]}"
  for t in 0 1 2 3; do
    line=$(head -1 "$T/submit/.gradsync-$JOB_ID/worker-$t.log" 2>/dev/null || true)
    [[ $line =~ :\ CUDA_VISIBLE_DEVICES=([0-3])\ --gpu=0$ ]] \
      || fail "--gpus-per-task=1: task $t's worker started as '$line'"
    [[ $seen != *"${BASH_REMATCH[1]}"* ]] || fail "--gpus-per-task=1: GPU ${BASH_REMATCH[1]} twice"
    seen+=${BASH_REMATCH[1]}
  done
  no_daemons_left "after the --gpus-per-task=1 job"
  log "GPU binding: --gres=gpu:4 -> --gpu=SLURM_LOCALID, --gpus-per-task=1 -> --gpu=0 (GPUs $seen)"
}

job_cancelled() {
  local id out run
  id=$(cd "$T/submit" && sbatch --parsable --ntasks=4 --output=long.out \
         --job-name=gradsync-long "$SBATCH_SCRIPT" --strategy=allreduce --epochs=1000 --quiet)
  out=$T/submit/long.out
  run=$T/submit/.gradsync-$id
  for _ in $(seq 120); do
    grep -qs 'training on' "$run"/worker-*.log && break
    squeue --noheader --jobs="$id" 2>/dev/null | grep -q . || fail "the long job ended early"
    sleep 0.5
  done
  grep -qs 'training on' "$run"/worker-*.log || fail "the long job did not start training in 60 s"
  [ "$(stat -c %a "$run")" = 700 ] || fail "$run is mode $(stat -c %a "$run"), not 700"
  [ "$(stat -c %a "$run/token")" = 600 ] || fail "the token is mode $(stat -c %a "$run/token")"
  [ -n "$(our_daemons)" ] || fail "no gradsync daemon of the long job found (pgrep marker)"
  log "long job $id training on $(our_daemons | wc -l) daemons: scancel"
  scancel "$id"
  wait_job "$id" 30 || fail "job $id still listed 30 s after scancel"
  no_daemons_left "after scancel"
  grep -q 'daemons stopped' "$out" || fail "the batch script's teardown did not run on scancel"
  [ ! -e "$run/token" ] || fail "the cancelled job left its token"
  log "scancel: teardown ran, no gradsync daemon left"
}

# --- 6. teardown -----------------------------------------------------------------
print_logs() {
  local f
  for f in "$T"/log/* "$T"/submit/*.out "$T"/submit/.gradsync-*/*.log; do
    [ -f "$f" ] || continue
    echo "----- ${f#"$T"/} (last 30 lines)"
    tail -n 30 "$f"
  done
}

# stop_pid PID NAME: SIGTERM, up to 10 s, then SIGKILL.
stop_pid() {
  [ -n "$1" ] || return 0
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  log "stopped $2 pid $1"
}

cleanup() {
  local rc=$? jobs left
  set +e
  trap - ERR
  if [ -n "$CTLD_PID" ] && kill -0 "$CTLD_PID" 2>/dev/null; then
    jobs=$(squeue --noheader --format=%i 2>/dev/null)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086  # a list of job ids
      scancel $jobs
      for _ in $(seq 40); do
        [ -z "$(squeue --noheader --format=%i 2>/dev/null)" ] && break
        sleep 0.5
      done
    fi
  fi
  left=$(our_daemons)
  if [ -n "$left" ]; then
    # shellcheck disable=SC2086  # a list of PIDs
    kill -9 $left 2>/dev/null
    log "killed gradsync daemons left behind: $(echo "$left" | tr '\n' ' ')"
  fi
  [ "$rc" -ne 0 ] && [ "$SKIPPING" = 0 ] && [ -n "$T" ] && print_logs
  stop_pid "$SLURMD_PID" slurmd
  stop_pid "$CTLD_PID" slurmctld
  stop_pid "$MUNGED_PID" munged
  [ -n "$T" ] && rm -rf "$T"
  if [ "$SKIPPING" = 1 ]; then :
  elif [ "$rc" -eq 0 ]; then log "PASSED"; else log "FAILED (exit $rc)"; fi
  exit "$rc"
}

main() {
  need_tools
  # Short: the munge socket's path must fit a unix socket address (108 bytes).
  T=$(mktemp -d /tmp/gsslurm.XXXXXX)
  chmod 755 "$T"
  mkdir -p "$T/log" "$T/submit"
  trap cleanup EXIT
  trap 'echo "slurm-test: failed: line $LINENO: $BASH_COMMAND" >&2' ERR
  trap 'exit 130' INT TERM
  start_munged
  start_slurm
  job_ps_and_ring
  job_that_fails
  gpu_binding
  job_cancelled
}

main "$@"
