#!/usr/bin/env bash
# The docker-compose round trip, end to end, on a machine with Debian's
# docker.io (docs/operations.md "Docker"):
#   1. installs docker.io, docker-compose (v1) and debootstrap if missing
#      (deploy/install-deps.sh docker);
#   2. uses the engine at DOCKER_HOST / /var/run/docker.sock if one answers,
#      else starts a private dockerd (overlay2 where the kernel has overlayfs,
#      else vfs; no iptables, no default bridge) on a socket of its own, and
#      at exit stops exactly that PID;
#   3. makes the base image debian:12 with debootstrap if the engine lacks it
#      (no image registry is reachable here);
#   4. builds gradsync:latest (deploy/Dockerfile, host network for apt; the
#      compose file's build: section is what `docker-compose up --build` uses);
#   5. makes a random cluster token (GRADSYNC_TOKEN_FILE, a compose secret)
#      and, with GRADSYNC_COMPOSE_TLS=1, dev certificates (make-dev-certs.sh,
#      overlay docker-compose.tls.yml); docker-compose up: server, PS shard
#      ps1, GRADSYNC_WORKERS workers (--scale), waits until they have joined
#      with distinct peer addresses; checks that a CLI without the token is
#      refused UNAUTHENTICATED;
#   6. submits ps-sync, ps-async on 2 shards and allreduce-sync from the host CLI
#      (build/bin/gradsync, from the README's first command) and allreduce-async
#      from the one-shot `submit` service (profile submit); each must end
#      SUCCEEDED;
#      then an elastic allreduce-sync job from the host CLI, one of whose worker
#      containers is killed (docker kill) mid-job: SUCCEEDED in >= 2
#      generations;
#   7. docker-compose down, always (trap), and prunes dangling images;
#   8. with GRADSYNC_COMPOSE_TORCH=1 (the default): builds the libtorch
#      variant gradsync:torch (Dockerfile --build-arg GRADSYNC_TORCH=ON) and
#      trains examples/models/lenet.py's TorchScript model in it with
#      `gradsync local` on 2 workers (the model written on the host with
#      Debian's python3-torch; without it that step says SKIPPED).
# Exit 0 when every job SUCCEEDED; 1 otherwise (logs of the cluster printed).
# Where an engine cannot be had (no packages, not root, dockerd does not come
# up) it prints one line "SKIPPED: compose-test: <reason>" and exits 0.
#
# The engine's data root (base image, layer cache) and the debootstrap
# tarball are kept in GRADSYNC_DOCKER_CACHE (default /var/cache/gradsync-docker),
# so a second run rebuilds only what changed; one run at a time per cache.
# Environment: GRADSYNC_DOCKER_CACHE, GRADSYNC_DOCKER_STORAGE (auto, overlay2 or
# vfs; default auto), GRADSYNC_WORKERS (default 4),
# GRADSYNC_COMPOSE_TORCH (default 1; 0 skips step 8),
# GRADSYNC_STEPS (steps per job, default 60), GRADSYNC_COMPOSE_TLS (1: mutual
# TLS too).
set -Eeuo pipefail   # -E: the ERR trap names the failing line in functions too
cd "$(dirname "$0")/.."
CACHE=${GRADSYNC_DOCKER_CACHE:-/var/cache/gradsync-docker}
WORKERS=${GRADSYNC_WORKERS:-4}
STEPS=${GRADSYNC_STEPS:-60}
export COMPOSE_PROJECT_NAME=gradsync-test
export DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0   # classic builder, one cache
DOCKERD_PID=""     # set only when this script started the engine
DATA_ROOT=""       # that engine's data root
LAUNCH_ERROR=""
RUN_DIR=""
UP=0
SKIPPING=0
START=$SECONDS

log() { echo "compose-test: [$((SECONDS - START))s] $*"; }
skip() {
  SKIPPING=1
  echo "======================================================================"
  echo "SKIPPED: compose-test: $*"
  echo "======================================================================"
  exit 0
}

# --- 1. tools ---------------------------------------------------------------
need_tools() {
  local t missing=""
  for t in dockerd docker-compose debootstrap; do
    command -v "$t" >/dev/null || missing="$missing $t"
  done
  [ -z "$missing" ] && return 0
  log "installing Debian's container tools (missing:$missing)"
  bash deploy/install-deps.sh docker >/dev/null 2>&1 \
    || skip "cannot install docker.io/docker-compose/debootstrap (missing:$missing)"
  { command -v dockerd >/dev/null && command -v docker-compose >/dev/null; } \
    || skip "docker.io/docker-compose installed but not on PATH"
}

# --- 2. engine --------------------------------------------------------------
# Debian's client (matches the 20.10 engine) before any other on PATH.
docker() {
  if [ -x /usr/bin/docker ]; then /usr/bin/docker "$@"; else command docker "$@"; fi
}
engine_answers() { timeout 20 docker version >/dev/null 2>&1; }

start_engine() {
  if [ -n "${DOCKER_HOST:-}" ] && engine_answers; then
    log "using the engine at DOCKER_HOST=$DOCKER_HOST"; return
  fi
  if [ -S /var/run/docker.sock ] \
      && DOCKER_HOST=unix:///var/run/docker.sock engine_answers; then
    export DOCKER_HOST=unix:///var/run/docker.sock
    log "using the running engine at $DOCKER_HOST"; return
  fi
  [ "$(id -u)" -eq 0 ] || skip "no engine is running and starting dockerd needs root"
  # Sockets live under a short path (unix socket paths are limited to 108 bytes).
  RUN_DIR=$(mktemp -d /tmp/gsdock.XXXXXX)
  # overlay2 where the kernel has overlayfs: a container's root is a mount,
  # not a copy, so every build step and container start over the multi-GB
  # build image costs seconds instead of minutes (vfs copies every layer
  # whole; the warm round trip took 990 s with it). vfs where overlay2
  # cannot run (no overlayfs, or a data root on a filesystem it refuses).
  # Each driver keeps its own data root, so neither reads the other's layers.
  local driver drivers=vfs why=""
  case "${GRADSYNC_DOCKER_STORAGE:-auto}" in
    auto) if grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null; then
            drivers="overlay2 vfs"
          fi ;;
    overlay2|vfs) drivers=$GRADSYNC_DOCKER_STORAGE ;;
    *) echo "compose-test: GRADSYNC_DOCKER_STORAGE must be auto, overlay2 or vfs" >&2; exit 2 ;;
  esac
  for driver in $drivers; do
    launch_dockerd "$driver" && return
    why="$driver: $LAUNCH_ERROR; $why"
  done
  skip "dockerd did not come up in 60 s (${why%; })"
}

# launch_dockerd DRIVER: a private dockerd with that storage driver on the
# data root of its own; 0 once it answers with that driver, else stopped
# again with the reason in LAUNCH_ERROR.
launch_dockerd() {
  local driver=$1 root="$CACHE/root" got
  [ "$driver" = vfs ] || root="$CACHE/root-$driver"
  mkdir -p "$root"
  DATA_ROOT=$root
  dockerd --storage-driver="$driver" --iptables=false --ip-masq=false --bridge=none \
    --data-root="$root" --exec-root="$RUN_DIR/exec" \
    --pidfile="$RUN_DIR/docker.pid" -H "unix://$RUN_DIR/docker.sock" \
    >"$RUN_DIR/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  export DOCKER_HOST="unix://$RUN_DIR/docker.sock"
  for _ in $(seq 60); do
    if engine_answers; then
      got=$(docker info --format '{{.Driver}}' 2>/dev/null || true)
      if [ "$got" = "$driver" ]; then
        log "started dockerd pid $DOCKERD_PID ($DOCKER_HOST, storage $driver, data root $root)"
        return 0
      fi
      LAUNCH_ERROR="it runs storage driver '$got'"
      stop_engine
      RUN_DIR=$(mktemp -d /tmp/gsdock.XXXXXX)
      return 1
    fi
    kill -0 "$DOCKERD_PID" 2>/dev/null || break
    sleep 1
  done
  LAUNCH_ERROR=$(grep -iE 'level=(fatal|error)' "$RUN_DIR/dockerd.log" | tail -1 | cut -c1-200)
  LAUNCH_ERROR=${LAUNCH_ERROR:-see $RUN_DIR/dockerd.log}
  cp "$RUN_DIR/dockerd.log" "/tmp/gsdock-$driver.log" 2>/dev/null || true
  stop_engine
  RUN_DIR=$(mktemp -d /tmp/gsdock.XXXXXX)
  return 1
}

stop_engine() {
  [ -n "$DOCKERD_PID" ] || return 0
  kill "$DOCKERD_PID" 2>/dev/null || true
  for _ in $(seq 30); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 1; done
  kill -9 "$DOCKERD_PID" 2>/dev/null || true
  wait "$DOCKERD_PID" 2>/dev/null || true
  log "stopped dockerd pid $DOCKERD_PID"
  # dockerd leaves its netns bind mount behind (and, killed, overlay2's
  # container mounts); only mounts under RUN_DIR and its data root.
  awk -v d="$RUN_DIR/" -v r="${DATA_ROOT:-/nonexistent}/" \
    'index($2, d) == 1 || index($2, r) == 1 {print $2}' /proc/mounts \
    | sort -r | xargs -r umount 2>/dev/null || true
  rm -rf "$RUN_DIR"
  DOCKERD_PID=""
}

# --- 3. base image ----------------------------------------------------------
# The mirror apt already uses (deb822 .sources or one-line .list).
apt_mirror() {
  { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
      | awk '{print $2}' || true
    # || true, not "; true": a failed pipeline (no sources.list) must not
    # reach the ERR trap, which would print a "failed" line for nothing.
    grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
      2>/dev/null | awk '{print $2}' || true; } \
    | grep -v security | head -1
}

make_base_image() {
  docker image inspect debian:12 >/dev/null 2>&1 && return 0
  local tar="$CACHE/debian12-minbase.tar"
  if [ ! -s "$tar" ]; then
    local mirror root
    mirror=$(apt_mirror)
    [ -n "$mirror" ] || { echo "no apt mirror found in /etc/apt" >&2; return 1; }
    log "debootstrap bookworm from $mirror (once; cached in $tar)"
    root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 \
      || { tail -20 "$root.log" >&2; rm -rf "$root"; return 1; }
    tar -C "$root" -cf "$tar.part" . && mv "$tar.part" "$tar"
    rm -rf "$root" "$root.log"
  fi
  docker import "$tar" debian:12 >/dev/null
  log "imported debian:12"
}

# --- 4.-6. build, up, jobs --------------------------------------------------
COMPOSE_FILES=(-f docker-compose.yml)
AUTH=()            # the host CLI's --token_file (and --tls_*) flags
compose() { docker-compose "${COMPOSE_FILES[@]}" "$@"; }

build_image() {
  log "building gradsync:latest"
  # The build stage (and so the dependency stage below it) gets a tag, so
  # that pruning dangling images keeps both cached for the next run. Both
  # builds go through the same client: docker-compose's (docker-py) context
  # tar hashes differently, so its COPY layers would never hit this cache.
  local b
  for b in "--target build -t gradsync-build:cache" "-t gradsync:latest"; do
    # shellcheck disable=SC2086  # b is two flags
    docker build --network=host $b -f deploy/Dockerfile . >>"$LOGS/build.log" 2>&1 \
      || { tail -40 "$LOGS/build.log"; return 1; }
  done
  docker run --rm gradsync:latest sh -c \
    'for b in /usr/local/bin/gradsync*; do ldd $b; done | grep "not found"' \
    && { echo "runtime libraries missing in the image" >&2; return 1; }
  log "image: $(docker image inspect -f '{{.Size}}' gradsync:latest) bytes"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits until the coordinator lists WORKERS workers with distinct addresses.
wait_for_workers() {
  local list n uniq
  for _ in $(seq 90); do
    list=$(timeout 10 "$CLI" list --json --server="$SERVER" "${AUTH[@]}" 2>/dev/null || true)
    n=$(grep -c '"peer_address"' <<<"$list" || true)
    uniq=$( (grep '"peer_address"' <<<"$list" || true) | sort -u | wc -l)
    if [ "$n" -ge "$WORKERS" ]; then
      [ "$uniq" -eq "$n" ] || { echo "duplicate peer addresses: $list" >&2; return 1; }
      log "$n workers joined: $(grep '"peer_address"' <<<"$list" | tr -d ' \n')"
      return 0
    fi
    sleep 1
  done
  echo "only ${n:-0} of $WORKERS workers joined in 90 s" >&2; return 1
}

# submit LABEL ARGS...: one job from the host CLI, which exits 0 on SUCCEEDED.
submit() {
  local label=$1; shift
  log "job $label (host CLI)"
  timeout 300 "$CLI" submit --server="$SERVER" "${AUTH[@]}" --workers="$WORKERS" \
    --steps="$STEPS" --wait --quiet "$@" >"$LOGS/$label.log" 2>&1 \
    || { cat "$LOGS/$label.log"; echo "job $label did not SUCCEED" >&2; return 1; }
  grep -m1 'state=SUCCEEDED' "$LOGS/$label.log" \
    || { cat "$LOGS/$label.log"; return 1; }
}

# The cluster token (always) and, with GRADSYNC_COMPOSE_TLS=1, certificates.
make_credentials() {
  export GRADSYNC_TOKEN_FILE=$LOGS/token
  (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$GRADSYNC_TOKEN_FILE")
  AUTH=(--token_file="$GRADSYNC_TOKEN_FILE")
  [ "${GRADSYNC_COMPOSE_TLS:-0}" = 1 ] || return 0
  export GRADSYNC_TLS_DIR=$LOGS/certs
  bash deploy/make-dev-certs.sh "$GRADSYNC_TLS_DIR" >/dev/null
  export GRADSYNC_TLS_FLAGS="--tls_cert=/run/secrets/gradsync-tls-cert \
--tls_key=/run/secrets/gradsync-tls-key --tls_ca=/run/secrets/gradsync-tls-ca"
  COMPOSE_FILES+=(-f docker-compose.tls.yml)
  AUTH+=(--tls_cert="$GRADSYNC_TLS_DIR/cert.pem" --tls_key="$GRADSYNC_TLS_DIR/key.pem"
         --tls_ca="$GRADSYNC_TLS_DIR/ca.pem")
  log "mutual TLS on (docker-compose.tls.yml)"
}

# A CLI without the token must be refused, and say so.
expect_refused() {
  local out
  out=$(timeout 10 env -u GRADSYNC_TOKEN "$CLI" list --server="$SERVER" \
        "${AUTH[@]:1}" 2>&1 || true)
  grep -q UNAUTHENTICATED <<<"$out" \
    || { echo "a CLI without the token was not refused: $out" >&2; return 1; }
  log "a CLI without the token: UNAUTHENTICATED"
}

run_jobs() {
  export GRADSYNC_PORT GRADSYNC_WORKERS=$WORKERS
  make_credentials
  GRADSYNC_PORT=$(free_port)
  SERVER=127.0.0.1:$GRADSYNC_PORT
  compose down --remove-orphans -t 5 >/dev/null 2>&1 || true  # a killed run's
  UP=1
  compose up -d --no-build --scale worker="$WORKERS"
  wait_for_workers
  expect_refused
  submit ps-sync --strategy=ps --mode=sync
  submit ps-async-2shards --strategy=ps --mode=async --ps_shards=2
  submit allreduce-sync --strategy=allreduce --mode=sync
  log "job allreduce-async (compose --profile submit run submit)"
  timeout 300 docker-compose "${COMPOSE_FILES[@]}" --profile submit run --rm submit \
    >"$LOGS/submit-service.log" 2>&1 \
    || { cat "$LOGS/submit-service.log"; echo "submit service failed" >&2; return 1; }
  grep -m1 'state=SUCCEEDED' "$LOGS/submit-service.log" \
    || { cat "$LOGS/submit-service.log"; return 1; }
  elastic_job
}

# An elastic allreduce-sync job survives one worker container killed mid-job
# (docker kill of one replica: docker-compose kill takes whole services): it
# must end SUCCEEDED in two or more generations, the first ended by the lost
# worker.
elastic_job() {
  log "job elastic-allreduce-sync: one worker container killed mid-job"
  timeout 300 "$CLI" submit --server="$SERVER" "${AUTH[@]}" --workers="$WORKERS" \
    --strategy=allreduce --mode=sync --elastic --min_workers=2 --epochs=2 --quiet \
    --wait --results="$LOGS/elastic.json" >"$LOGS/elastic.log" 2>&1 &
  local pid=$! step=0 victim
  for _ in $(seq 240); do
    step=$(timeout 10 "$CLI" list --json --server="$SERVER" "${AUTH[@]}" 2>/dev/null \
      | python3 -c 'import json, sys
jobs = [j for j in json.load(sys.stdin)["jobs"]
        if j.get("elastic") and j["state"] == "RUNNING"]
print(jobs[0]["step"] if jobs else 0)' || echo 0)
    [ "$step" -ge 100 ] && break
    sleep 0.5
  done
  victim=$(compose ps -q worker | tail -n 1)
  docker kill "$victim" >/dev/null
  log "killed worker container ${victim:0:12} at step $step"
  wait "$pid" || { cat "$LOGS/elastic.log"; echo "elastic job did not SUCCEED" >&2; return 1; }
  python3 - "$LOGS/elastic.json" <<'PY' || { cat "$LOGS/elastic.log"; return 1; }
import json, sys
r = json.load(open(sys.argv[1]))
g = r["generations"]
assert r["state"] == "SUCCEEDED" and len(g) >= 2 and "lost" in g[0]["ended_because"], r
print("elastic job SUCCEEDED in %d generations; generation 0 ended: %s"
      % (len(g), g[0]["ended_because"]))
PY
}

# --- 8. the libtorch variant ----------------------------------------------
torch_variant() {
  [ "${GRADSYNC_COMPOSE_TORCH:-1}" = 1 ] || return 0
  if ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
    echo "SKIPPED: compose-test: the libtorch image: no python3-torch on the host" \
      "to write the model (bash deploy/install-deps.sh)"
    return 0
  fi
  log "building gradsync:torch (--build-arg GRADSYNC_TORCH=ON)"
  # The build stage is gradsync:latest's (both workers come out of it), so
  # only the last stage is new. Earlier versions built a stage of its own
  # for this image; its tag would keep gigabytes of cache alive.
  docker rmi gradsync-build:torch-cache >/dev/null 2>&1 || true
  docker build --network=host --build-arg GRADSYNC_TORCH=ON -t gradsync:torch \
    -f deploy/Dockerfile . >>"$LOGS/build-torch.log" 2>&1 \
    || { tail -40 "$LOGS/build-torch.log"; return 1; }
  log "image gradsync:torch: $(docker image inspect -f '{{.Size}}' gradsync:torch) bytes"
  mkdir -p "$LOGS/torch"
  /usr/bin/python3 examples/models/lenet.py --out "$LOGS/torch/lenet.pt" >/dev/null
  log "job lenet (TorchScript) in gradsync:torch, 2 workers"
  timeout 300 docker run --rm --network=none -v "$LOGS/torch:/m:ro" gradsync:torch \
    gradsync local --model=torchscript:/m/lenet.pt --workers=2 --epochs=1 \
    --train_limit=1280 --lr=0.003 >"$LOGS/torch.log" 2>&1 \
    || { cat "$LOGS/torch.log"; echo "the TorchScript job in gradsync:torch failed" >&2
         return 1; }
  grep -m1 'SUCCEEDED' "$LOGS/torch.log" || { cat "$LOGS/torch.log"; return 1; }
}

# --- 7. teardown ------------------------------------------------------------
cleanup() {
  local rc=$?
  set +e
  if [ "$UP" = 1 ]; then
    [ "$rc" -ne 0 ] && compose logs --no-color --tail=30 2>&1 | tail -150
    compose --profile submit --profile gpu down --remove-orphans -t 5 >/dev/null 2>&1
    log "cluster down"
  fi
  [ -n "$DOCKERD_PID" ] && docker image prune -f >/dev/null 2>&1
  stop_engine
  [ -n "${LOGS:-}" ] && rm -rf "$LOGS"
  if [ "$SKIPPING" = 1 ]; then :
  elif [ "$rc" -eq 0 ]; then log "PASSED"; else log "FAILED (exit $rc)"; fi
  exit "$rc"
}

main() {
  CLI=${GRADSYNC_CLI:-build/bin/gradsync}
  [ -x "$CLI" ] || { echo "compose-test: $CLI missing: run the README's first" \
    "command (deploy/build.sh) first" >&2; exit 1; }
  need_tools
  mkdir -p "$CACHE"
  exec 9>"$CACHE/lock"
  flock -w 1800 9 || { echo "compose-test: $CACHE is locked by another run" >&2; exit 1; }
  LOGS=$(mktemp -d /tmp/gradsync-compose-test.XXXXXX)
  trap cleanup EXIT
  trap 'echo "compose-test: failed: line $LINENO: $BASH_COMMAND" >&2' ERR
  trap 'exit 130' INT TERM
  start_engine
  make_base_image
  build_image
  run_jobs
  torch_variant
}

main "$@"
