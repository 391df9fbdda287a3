#!/usr/bin/env python3
"""The PS-vs-ring experiment on emulated hosts (issue 8, item 3): the
command.

  python3 bench/experiments/experiment.py run  [flags]   (root)
  python3 bench/experiments/experiment.py plot [--out=DIR] [--burst=B] [--base=DIR]

`python3 bench/experiments/experiment.py --help` prints every flag, what run and plot
do, and the models: that text heads the package beside this file,
bench/experiments/gradsync_experiment/__init__.py, which holds the code by concern:

  cli       the flags and main(): run, then collect, fit, report, draw
  sweep     run: the emulated hosts (bench/experiments/netem-cluster.sh), the bench jobs
  results   the run directory: the jobs' results in, the tables out, --base
  analysis  the fit of the models (bench/experiments/experiment_model.py and
            bench/experiments/flow_model.py), the notes, the crossovers
  report    the text report
  plots     the PNGs (matplotlib)

The names imported below are those the tests (tests/bench/) reach as
experiment.X, as they did before the code moved into the package.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Re-exported for the tests, not used here (hence F401).
from experiment_model import (  # noqa: E402,F401
    DEFAULT_BURST, Link, fit, measured_crossover, model, model_crossover, payload_burst,
    pushpull_model, pushpull_rounds, row_model, schedule, shaped_seconds)
from gradsync_experiment.analysis import (  # noqa: E402,F401
    TIE_SLACK, analyse, crossover_agreement, crossovers, note, shaping)
from gradsync_experiment.cli import main, parse_args  # noqa: E402,F401
from gradsync_experiment.report import fit_sources, sources  # noqa: E402,F401
from gradsync_experiment.results import (  # noqa: E402,F401
    CONFIG_NAME, DERIVED, RESULT_NAME, collect, merge_base, rate_bytes, read_base,
    write_tables)
from gradsync_experiment.sweep import Cluster, run_config, split_sizes  # noqa: E402,F401

if __name__ == "__main__":
    main(sys.argv[1:])
