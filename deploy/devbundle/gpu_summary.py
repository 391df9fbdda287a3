#!/usr/bin/env python3
"""One table from the GPU checks (run-gpu-checks.sh).

  gpu_summary.py --merge-tests RAWDIR   -> tests.json on stdout
  gpu_summary.py --merge-perf RAWDIR    -> perf.json on stdout
  gpu_summary.py DIR [DIR...]           -> the table, from tests.json /
                                           perf.json found in the DIRs
"""
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
