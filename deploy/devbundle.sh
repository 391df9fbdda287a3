#!/usr/bin/env bash
# Packs what a run on the lent GPU machine needs (see ../shared/DEVICE_NOTES.md)
# into .devbundle/ (git-ignored): the binaries, every test binary, their
# non-system shared libraries, Fashion-MNIST, the PyTorch baseline script, the
# check script run-gpu-checks.sh and its summary script gpu_summary.py.
#
# Build first with CUDA on (GRADSYNC_CUDA=ON bash deploy/build.sh, or any
# build directory: BUILD_DIR=build-x bash deploy/devbundle.sh). Then, with the
# device tool: carry [".devbundle"] and run
#   bash .devbundle/run-gpu-checks.sh            # everything (~5-8 minutes)
#   bash .devbundle/run-gpu-checks.sh tests      # only the test binaries
#   bash .devbundle/run-gpu-checks.sh perf       # only the measurements
#   bash .devbundle/run-sweep.sh NAME [experiment.py run flags]
#                          # issue 8's sweep on emulated hosts (16 cores);
#                          # the README's "next lent machine" line re-sweeps
#                          # the small sizes in ~4 min (then plot --base here)
#   bash .devbundle/run-train-sweep.sh NAME [experiment_train.py run flags]
#   bash bench/latency_vs_n.sh --build-dir=.devbundle
#                          # small-allreduce latency against N: bare gRPC,
#                          # plain processes, daemons (~1 minute)
#                          # the four modes training on emulated hosts
# Each phase leaves at most 6 files in $OUT (the device tool returns 8):
# tests.json + tests.log, perf.json + perf.log, summary.txt, raw.tar.gz. The
# summary table is printed at the end and can be rebuilt here from one or
# more fetched $OUT folders:
#   python3 .devbundle/gpu_summary.py DIR [DIR...]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
TESTS="cuda_tests cuda_trainer_test train_tests sync_tests collectives_tests"
rm -rf .devbundle && mkdir -p .devbundle/bin .devbundle/lib .devbundle/data
cp "$B"/bin/gradsync "$B"/bin/gradsync-server "$B"/bin/gradsync-worker \
  .devbundle/bin/
for t in $TESTS; do
  if [ -x "$B/tests/$t" ]; then
    cp "$B/tests/$t" .devbundle/bin/
  else
    echo "devbundle: $B/tests/$t not built; the checks will report it missing" >&2
  fi
done
# bench/latency_vs_n.sh --build-dir=.devbundle runs these beside gradsync.
for t in grpc_latency_probe allreduce_compare; do
  if [ -x "$B/bench/$t" ]; then
    cp "$B/bench/$t" .devbundle/bin/
  else
    echo "devbundle: $B/bench/$t not built; bench/latency_vs_n.sh will say so" >&2
  fi
done
strip .devbundle/bin/*   # the carry limit is 64 MiB for the whole tree
for b in .devbundle/bin/*; do ldd "$b"; done | awk '/=>/{print $3}' | sort -u \
  | grep -vE '/(libc|libm|libgcc_s|libstdc\+\+|libpthread|libdl|librt)\.so' \
  | grep -v '/usr/local/cuda' | grep -v 'libcuda\.so' \
  | xargs -I{} cp -L {} .devbundle/lib/
strip --strip-unneeded .devbundle/lib/* 2>/dev/null || true
cp /usr/share/datasets/fashion-mnist/*.gz .devbundle/data/
cp bench/torch_compare.py .devbundle/

cat > .devbundle/run-gpu-checks.sh <<'RUN'
#!/usr/bin/env bash
# On the GPU machine: the test binaries, CPU-vs-GPU throughput, the strategy
# comparison on the GPU and the PyTorch baseline; one summary table at the
# end. Usage: run-gpu-checks.sh [all|tests|perf]. Every command has its own
# time limit, so one hang costs minutes, not the session.
set -u
PHASE=${1:-all}
D=$(cd "$(dirname "$0")" && pwd)
[ -d "$D/bin" ] || tar -C "$D" -xJf "$D/bin-lib.tar.xz"
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/gpu-checks-out}
W=$(mktemp -d /tmp/gpu-checks.XXXXXX)   # raw results, packed into raw.tar.gz
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv \
  || echo "nvidia-smi failed"
# The tests read Fashion-MNIST from its default path (and skip, saying so,
# when it is missing).
mkdir -p /usr/share/datasets/fashion-mnist 2>/dev/null \
  && cp -n "$D"/data/*.gz /usr/share/datasets/fashion-mnist/ 2>/dev/null

if [ "$PHASE" = all ] || [ "$PHASE" = tests ]; then
  # name:seconds; GPU tests first.
  for spec in cuda_tests:300 cuda_trainer_test:240 train_tests:120 \
              sync_tests:240 collectives_tests:180; do
    t=${spec%%:*}; limit=${spec##*:}
    if [ ! -x "$D/bin/$t" ]; then echo "missing" > "$W/$t.rc"; continue; fi
    echo "=== $t (limit ${limit}s)" | tee -a "$OUT/tests.log"
    timeout "$limit" "$D/bin/$t" --gtest_output="json:$W/$t.json" \
      > "$W/$t.log" 2>&1
    echo $? > "$W/$t.rc"
    # Failures and the final counts into the log that comes back.
    grep -E '^\[  (FAILED|PASSED|SKIPPED) |Failure|error|Expected|Which is|actual' \
      "$W/$t.log" | grep -vE '^\[  SKIPPED \] [^0-9]' | head -200 \
      >> "$OUT/tests.log"
    tail -3 "$W/$t.log" >> "$OUT/tests.log"
  done
  python3 "$D/gpu_summary.py" --merge-tests "$W" > "$OUT/tests.json"
fi

if [ "$PHASE" = all ] || [ "$PHASE" = perf ]; then
  {
    for m in 784-256-128-10 784-4096-4096-10; do
      for dev in cpu cuda; do
        echo "=== one worker, $dev, mlp:$m, 300 steps"
        timeout 300 "$D/bin/gradsync" local --device=$dev --workers 1 \
          --steps 300 --model=mlp:$m --data-dir="$D/data" --quiet \
          --results="$W/one-$dev-$m.json" 2>&1 | tail -5
      done
    done
    echo "=== compare, cuda, 4 workers, 1 epoch"
    timeout 420 "$D/bin/gradsync" local --device=cuda --compare --workers 4 \
      --epochs 1 --data-dir="$D/data" --results="$W/compare-cuda.json" 2>&1 \
      | tail -14
    for m in 784-256-128-10 784-4096-4096-10; do
      echo "=== PyTorch, mlp:$m, single process and DDP (4 processes, gloo)"
      timeout 300 python3 "$D/torch_compare.py" --data-dir "$D/data" \
        --widths $m --workers 4 --steps 300 2>&1 | tee "$W/torch-$m.jsonl"
    done
  } > "$OUT/perf.log" 2>&1
  python3 "$D/gpu_summary.py" --merge-perf "$W" > "$OUT/perf.json"
fi

tar -C "$W" -czf "$OUT/raw.tar.gz" . 2>/dev/null
python3 "$D/gpu_summary.py" "$OUT" | tee "$OUT/summary.txt"
RUN
chmod +x .devbundle/run-gpu-checks.sh

cat > .devbundle/gpu_summary.py <<'PY'
#!/usr/bin/env python3
"""One table from the GPU checks (run-gpu-checks.sh).

  gpu_summary.py --merge-tests RAWDIR   -> tests.json on stdout
  gpu_summary.py --merge-perf RAWDIR    -> perf.json on stdout
  gpu_summary.py DIR [DIR...]           -> the table, from tests.json /
                                           perf.json found in the DIRs
"""
import glob
import json
import os
import sys

MODELS = ["784-256-128-10", "784-4096-4096-10"]
TESTS = ["cuda_tests", "cuda_trainer_test", "train_tests", "sync_tests",
         "collectives_tests"]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def merge_tests(raw):
    out = {}
    for t in TESTS:
        rc_path = os.path.join(raw, t + ".rc")
        rc = open(rc_path).read().strip() if os.path.exists(rc_path) else "not run"
        g = load(os.path.join(raw, t + ".json"))
        row = {"rc": rc, "passed": 0, "failed": 0, "skipped": 0,
               "failed_tests": []}
        if g is None:
            row["note"] = {"missing": "binary missing from the bundle",
                           "not run": "not run"}.get(
                               rc, "no gtest report (crashed, or timed out "
                                   "if rc 124; rc %s)" % rc)
        else:
            for suite in g.get("testsuites", []):
                for case in suite.get("testsuite", []):
                    name = suite["name"] + "." + case["name"]
                    if case.get("failures"):
                        row["failed"] += 1
                        row["failed_tests"].append(name)
                    elif case.get("result") == "SKIPPED":
                        row["skipped"] += 1
                    elif case.get("status", "RUN") == "RUN":
                        row["passed"] += 1
        out[t] = row
    return out


def merge_perf(raw):
    out = {"one_worker": {}, "compare": None, "torch": {}}
    for m in MODELS:
        for dev in ("cpu", "cuda"):
            j = load(os.path.join(raw, "one-%s-%s.json" % (dev, m)))
            out["one_worker"]["%s/%s" % (m, dev)] = j
        rows = []
        path = os.path.join(raw, "torch-%s.jsonl" % m)
        if os.path.exists(path):
            for line in open(path):
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass
        out["torch"][m] = rows
    out["compare"] = load(os.path.join(raw, "compare-cuda.json"))
    return out


def fmt(v, spec="%.0f"):
    return "n/a" if v is None else spec % v


def table(dirs):
    tests, perf = {}, {"one_worker": {}, "compare": None, "torch": {}}
    for d in dirs:
        t = load(os.path.join(d, "tests.json"))
        if t:
            tests.update(t)
        p = load(os.path.join(d, "perf.json"))
        if p:
            perf["one_worker"].update({k: v for k, v in p["one_worker"].items() if v})
            perf["torch"].update({k: v for k, v in p["torch"].items() if v})
            perf["compare"] = p["compare"] or perf["compare"]
    lines = ["", "=" * 100, "GPU checks summary", "=" * 100, "",
             "%-20s %7s %7s %7s  %s" % ("tests", "passed", "failed", "skipped",
                                        "notes")]
    for t in TESTS:
        r = tests.get(t)
        if r is None:
            lines.append("%-20s %7s %7s %7s  not run in these folders" % (t, "-", "-", "-"))
            continue
        note = r.get("note", "")
        if r["failed_tests"]:
            note = "FAILED: " + ", ".join(r["failed_tests"][:6]) + (
                " ..." if len(r["failed_tests"]) > 6 else "")
        elif r["rc"] not in ("0", "missing") and not note:
            note = "exit code " + r["rc"]
        lines.append("%-20s %7d %7d %7d  %s" % (t, r["passed"], r["failed"],
                                                 r["skipped"], note))
    if tests:
        lines.append("%-20s %7d %7d %7d" % (
            "total", sum(r["passed"] for r in tests.values()),
            sum(r["failed"] for r in tests.values()),
            sum(r["skipped"] for r in tests.values())))

    lines += ["", "One worker, 300 steps, batch 32, adam (gradsync local --workers 1)"
              " beside PyTorch on the same GPU (batch 32, adam):",
              "%-18s %-5s %11s %10s %9s %10s %8s  %13s %15s" % (
                  "model", "dev", "samples/s", "compute_s", "comm_s",
                  "exposed_s", "wall_s", "torch single", "torch ddp x4")]
    for m in MODELS:
        torch_rows = perf["torch"].get(m) or []
        single = next((r["samples_per_second"] for r in torch_rows
                       if r.get("config") == "single"), None)
        ddp = next((r["samples_per_second"] for r in torch_rows
                    if r.get("config", "").startswith("ddp")), None)
        for dev in ("cpu", "cuda"):
            j = perf["one_worker"].get("%s/%s" % (m, dev)) or {}
            lines.append("%-18s %-5s %11s %10s %9s %10s %8s  %13s %15s" % (
                m, dev, fmt(j.get("samples_per_second")),
                fmt(j.get("compute_seconds"), "%.2f"),
                fmt(j.get("comm_seconds"), "%.2f"),
                fmt(j.get("exposed_comm_seconds"), "%.2f"),
                fmt(j.get("wall_seconds"), "%.2f"),
                fmt(single) if dev == "cuda" else "",
                fmt(ddp) if dev == "cuda" else ""))
            if j and j.get("state") != "SUCCEEDED":
                lines.append("%-18s %s: %s" % ("", j.get("state"),
                                               j.get("error", "")[:80]))
        cpu = (perf["one_worker"].get("%s/cpu" % m) or {}).get("samples_per_second")
        gpu = (perf["one_worker"].get("%s/cuda" % m) or {}).get("samples_per_second")
        if cpu and gpu:
            lines.append("%-18s GPU/CPU %.1fx%s" % (
                "", gpu / cpu,
                ("; GPU/PyTorch single %.2fx" % (gpu / single)) if single else ""))

    lines += ["", "Strategies on the GPU, 4 workers, 1 epoch (gradsync local --device=cuda"
              " --compare):",
              "%-16s %9s %11s %10s %9s %10s %8s" % (
                  "strategy", "state", "samples/s", "compute_s", "comm_s",
                  "exposed_s", "test_acc")]
    comp = perf["compare"] or {}
    for j in comp.get("jobs", []):
        if j.get("state") != "SUCCEEDED":
            lines.append("%-16s %9s  %s" % (
                j.get("strategy", "?") + "-" + j.get("mode", "?"),
                j.get("state", "?"), j.get("error", "")[:70]))
            continue
        label = j.get("strategy", "?") + "-" + j.get("mode", "?")
        if j.get("staleness") is not None and j.get("mode") == "async":
            label += "(s=%s)" % j["staleness"]
        lines.append("%-16s %9s %11s %10s %9s %10s %8s" % (
            label, j.get("state", "?"), fmt(j.get("samples_per_second")),
            fmt(j.get("compute_seconds"), "%.2f"),
            fmt(j.get("comm_seconds"), "%.2f"),
            fmt(j.get("exposed_comm_seconds"), "%.2f"),
            fmt(j.get("test_accuracy"), "%.4f")))
    if not comp.get("jobs"):
        lines.append("(no comparison results)")
    ddp = next((r["samples_per_second"] for r in perf["torch"].get(MODELS[0]) or []
                if r.get("config", "").startswith("ddp")), None)
    lines.append("%-16s %9s %11s   (PyTorch DDP, gloo, 4 processes, %s)" % (
        "torch-ddp", "", fmt(ddp), MODELS[0]))
    lines.append("")
    return "\n".join(lines)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--merge-tests":
        print(json.dumps(merge_tests(sys.argv[2]), indent=1))
    elif len(sys.argv) == 3 and sys.argv[1] == "--merge-perf":
        print(json.dumps(merge_perf(sys.argv[2]), indent=1))
    elif len(sys.argv) >= 2 and not sys.argv[1].startswith("-"):
        print(table(sys.argv[1:]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
PY
chmod +x .devbundle/gpu_summary.py

# The emulated hosts of issue 8's experiment (deploy/netem-cluster.sh) need
# ip and tc, which the GPU machine lacks (its kernel has veth, bridge and
# tbf; not sch_netem): this machine's iproute2 and its libraries, behind
# wrappers that point the loader at them.
if command -v ip >/dev/null && command -v tc >/dev/null; then
  mkdir -p .devbundle/net/bin .devbundle/net/real .devbundle/net/lib
  for b in ip tc; do
    cp -L "$(command -v $b)" .devbundle/net/real/
    cat > .devbundle/net/bin/$b <<EOF
#!/bin/sh
D=\$(cd "\$(dirname "\$0")/.." && pwd)
LD_LIBRARY_PATH=\$D/lib:\${LD_LIBRARY_PATH:-} exec "\$D/real/$b" "\$@"
EOF
    chmod +x .devbundle/net/bin/$b
  done
  for b in .devbundle/net/real/*; do ldd "$b"; done | awk '/=>/{print $3}' \
    | sort -u | grep -vE '/(libc|libm|libpthread|libdl|librt)\.so' \
    | xargs -I{} cp -L {} .devbundle/net/lib/
else
  echo "devbundle: no ip/tc here (apt-get install iproute2); run-sweep.sh will not work" >&2
fi

cat > .devbundle/run-sweep.sh <<'RUN'
#!/usr/bin/env bash
# On the GPU machine (16 cores): issue 8's sweep on emulated hosts, e.g.
#   bash .devbundle/run-sweep.sh a --workers=2,3,4,5 --hier-hosts=2,3,4 ...
# NAME and bench/experiment.py run's flags; the results come back as
# $OUT/exp-NAME.tar.gz (merge and redraw here with experiment.py plot).
# SWEEP_LIMIT (seconds, default 530) bounds the run so the tarball is
# always written. experiment.py runs each small point in --repeats-small=3
# jobs by default; the 2026-11-23 sweeps (one job each) took 9 min in two
# runs, so budget about a minute more per run, or pass --repeats-small=1.
set -u
D=$(cd "$(dirname "$0")" && pwd)
[ -d "$D/bin" ] || tar -C "$D" -xJf "$D/bin-lib.tar.xz"
export PATH=$D/net/bin:$PATH
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
name=${1:?usage: run-sweep.sh NAME [experiment.py run flags]}; shift
OUT=${OUT:-/tmp/sweep-out}; mkdir -p "$OUT"
ip -V && tc -V || exit 1
# The kernel's parts, before the sweep: veth and tbf.
if ip netns add gs-probe && ip -n gs-probe link add va type veth peer name vb &&
   tc -n gs-probe qdisc add dev va root tbf rate 1gbit burst 73728 limit 8388608; then
  echo "probe: veth + tbf ok"
else
  echo "probe: no veth or tbf here"; ip netns del gs-probe 2>/dev/null; exit 1
fi
ip netns del gs-probe
timeout "${SWEEP_LIMIT:-530}" python3 "$D/../bench/experiment.py" run \
  --build-dir="$D" --out="/tmp/exp-$name" "$@" 2>&1 | tail -80
tar -C /tmp -czf "$OUT/exp-$name.tar.gz" "exp-$name"
RUN
chmod +x .devbundle/run-sweep.sh

cat > .devbundle/run-train-sweep.sh <<'RUN'
#!/usr/bin/env bash
# On the GPU machine (16 cores): the four modes training on emulated hosts,
#   bash .devbundle/run-train-sweep.sh a --workers=1,2,4,8 --epochs=2
# NAME and bench/experiment_train.py run's flags (--network=emulated, the
# bundle's binaries and Fashion-MNIST are given here); the results come back
# as $OUT/train-NAME.tar.gz (redraw here with experiment_train.py plot).
# SWEEP_LIMIT (seconds, default 530) bounds the run so the tarball is
# always written.
set -u
D=$(cd "$(dirname "$0")" && pwd)
[ -d "$D/bin" ] || tar -C "$D" -xJf "$D/bin-lib.tar.xz"
export PATH=$D/net/bin:$PATH
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
name=${1:?usage: run-train-sweep.sh NAME [experiment_train.py run flags]}; shift
OUT=${OUT:-/tmp/sweep-out}; mkdir -p "$OUT"
ip -V && tc -V || exit 1
timeout "${SWEEP_LIMIT:-530}" python3 "$D/../bench/experiment_train.py" run \
  --network=emulated --build-dir="$D" --data-dir="$D/data" \
  --out="/tmp/train-$name" "$@" 2>&1 | tail -60
tar -C /tmp -czf "$OUT/train-$name.tar.gz" "train-$name"
RUN
chmod +x .devbundle/run-train-sweep.sh

# Binaries and libraries compress well (OpenBLAS alone is 36 MB); the data is
# already gzip. The run script unpacks them first.
tar -C .devbundle -cJf .devbundle/bin-lib.tar.xz bin lib
rm -rf .devbundle/bin .devbundle/lib
du -sh .devbundle
