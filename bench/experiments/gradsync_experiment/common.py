"""What every part of the experiment shares: the repository's root, the
size below which a point is small, and exiting with one line."""

import json
import os
import sys

# This file is bench/experiments/gradsync_experiment/common.py in the repository.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
SMALL = 1 << 20    # sizes below this get --iters-small iterations


def read_json(path, prog="experiment"):
    """The JSON in `path`; exits 1 naming the file when it cannot be read or
    is not JSON (a half-written result, a file that is something else)."""
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        die("cannot read %s: %s" % (path, e.strerror or e), 1, prog)
    except ValueError as e:
        die("%s is not valid JSON (%s)" % (path, e), 1, prog)


def die(msg, code=2, prog="experiment"):
    print(prog + ": " + msg, file=sys.stderr)
    sys.exit(code)


def mode_label(job):
    """A results job's "STRATEGY-MODE" label ("allreduce-sync"). Results
    written before the strategy was renamed say "ring" for allreduce; they
    read under the new name."""
    strategy = job["strategy"]
    if strategy == "ring":
        strategy = "allreduce"
    return "%s-%s" % (strategy, job["mode"])
