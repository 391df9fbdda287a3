"""The command line: `run|plot --key=value...` (parse_command(), shared with
bench/experiments/experiment_train.py), experiment.py's flags and main(): run sweeps,
then collect, fit, report and draw (what `plot` does alone)."""

import re
import sys

from experiment_model import DEFAULT_BURST

from . import USAGE
from .analysis import analyse, shaping
from .common import die
from .plots import have_matplotlib, plot
from .report import report
from .results import collect, merge_base, read_base, remembered_base, write_tables
from .sweep import SWEEP, exit_on_sigterm, run, run_config


def parse_command(argv, doc, defaults, prog):
    """`run|plot --key=value...` over `defaults` (shared with
    experiment_train.py): (command, options as text); --help prints `doc`."""
    if not argv or argv[0] not in ("run", "plot") or "-h" in argv or "--help" in argv:
        print(doc)
        sys.exit(0 if argv and ("-h" in argv or "--help" in argv) else 2)
    opts = dict(defaults)
    for a in argv[1:]:
        m = re.fullmatch(r"--([a-z-]+)=(.*)", a)
        if not m or m.group(1) not in opts:
            die("unknown argument %s (see --help)" % a, prog=prog)
        opts[m.group(1)] = m.group(2)
    return argv[0], opts


def int_list(text, flag, lo, hi):
    try:
        values = [int(v) for v in text.split(",") if v != ""]
    except ValueError:
        die("--%s takes integers separated by commas, got %r" % (flag, text))
    if any(v < lo or v > hi for v in values):
        die("--%s: each value must be %d..%d" % (flag, lo, hi))
    return values


def parse_args(argv):
    cmd, opts = parse_command(argv, USAGE, {
        "workers": "2,3,4", "sizes": "4K,64K,1M,16M,64M",
        "algorithms": ",".join(SWEEP), "rate": "1gbit", "shaper": "tbf",
        "burst": None, "limit": "", "iters": "3", "iters-small": "20", "repeats-small": "3",
        "hier-hosts": "2,3,4",
        "hier-per-host": "2", "ps-partition-bytes": "", "peer-bulk-bytes": "",
        "ps-reduce-threads": "", "out": "experiment-results",
        "build-dir": "build", "base": ""},
        "experiment")
    opts["workers"] = int_list(opts["workers"], "workers", 2, 16)
    opts["hier-hosts"] = int_list(opts["hier-hosts"], "hier-hosts", 2, 16)
    [opts["iters"]] = int_list(opts["iters"], "iters", 1, 1000) or [3]
    [opts["iters-small"]] = int_list(opts["iters-small"], "iters-small", 1, 1000) or [20]
    [opts["repeats-small"]] = int_list(opts["repeats-small"], "repeats-small", 1, 20) or [3]
    [opts["hier-per-host"]] = int_list(opts["hier-per-host"], "hier-per-host", 2, 8) or [2]
    if opts["shaper"] not in ("netem", "tbf"):
        die("--shaper must be netem or tbf")
    # run: tbf's bucket (empty: the cluster's own default); plot: the bucket
    # the model assumes (not given: the run's configuration, see shaping()).
    if opts["burst"] is None and cmd == "run":
        opts["burst"] = str(DEFAULT_BURST)
    for flag in ("burst", "limit", "ps-partition-bytes"):
        if opts[flag] and not opts[flag].isdigit():
            die("--%s takes a byte count, got %r" % (flag, opts[flag]))
    if opts["ps-reduce-threads"] and not (opts["ps-reduce-threads"].isdigit() and
                                          1 <= int(opts["ps-reduce-threads"]) <= 64):
        die("--ps-reduce-threads takes 1..64, got %r" % opts["ps-reduce-threads"])
    if opts["peer-bulk-bytes"] and not re.fullmatch(r"-1|\d+", opts["peer-bulk-bytes"]):
        die("--peer-bulk-bytes takes a byte count or -1, got %r" % opts["peer-bulk-bytes"])
    if cmd == "plot" and opts["burst"] == "":
        die("plot --burst= takes a byte count (0: no bucket, plain alpha-beta)")
    opts["algorithms"] = opts["algorithms"].split(",")
    for alg in opts["algorithms"]:
        if alg not in SWEEP:
            die("unknown algorithm %s (want %s)" % (alg, ",".join(SWEEP)))
    return cmd, opts


def main(argv):
    exit_on_sigterm()
    cmd, opts = parse_args(argv)
    if cmd == "run":
        if opts["base"] and opts["base"] != "none":
            read_base(opts["base"], run_config(opts))   # before the sweep, not after
        run(opts)
    rows, config = collect(opts["out"])
    base = opts["base"]
    if not base and cmd == "plot":
        base = remembered_base(opts["out"])
        if base:
            print("merging with the earlier run this directory was drawn with: --base=%s "
                  "(--base=none draws this run alone)" % base)
    if base and base != "none":
        rows, config = merge_base(rows, config, base)
    link = shaping(opts["burst"] if cmd == "plot" else None, config)
    summary = analyse(rows, link, config)
    write_tables(opts["out"], summary)
    report(summary)
    if not have_matplotlib():
        print("no matplotlib here: tables written, no plots "
              "(run `plot` where python3-matplotlib is)")
        return
    plot(opts["out"], summary)
