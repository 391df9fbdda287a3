"""Job options (the `gradsync submit` job flags as one dataclass) and their
conversion to the wire message JobSpec; the text names of the enums, as the
CLI and the results files spell them (common/spec/job_spec.cc).
"""

import dataclasses
import os
import re
import warnings
from typing import Optional

import grpc

from .errors import ConfigError, SpecError

# Text name -> wire enum value name, per JobSpec field (kStrategies, ... in
# common/spec/spec_enum_names.h). The first name of a value is the one
# printed; _OLD_NAMES are read too.
_NAMES = {
    "strategy": {"ps": "STRATEGY_PS", "allreduce": "STRATEGY_ALLREDUCE"},
    "mode": {"sync": "SYNC_MODE_SYNC", "async": "SYNC_MODE_ASYNC"},
    "device": {"cpu": "DEVICE_CPU", "cuda": "DEVICE_CUDA"},
    "optimizer": {"sgd": "OPTIMIZER_SGD", "adam": "OPTIMIZER_ADAM"},
    "algorithm": {"auto": "ALGORITHM_AUTO", "ring": "ALGORITHM_RING",
                  "hd": "ALGORITHM_HALVING_DOUBLING", "rd": "ALGORITHM_RECURSIVE_DOUBLING",
                  "hier": "ALGORITHM_HIERARCHICAL"},
    "wire_dtype": {"fp32": "WIRE_DTYPE_FP32", "bf16": "WIRE_DTYPE_BF16",
                   "fp16": "WIRE_DTYPE_FP16"},
    "weight_prediction": {"auto": "WEIGHT_PREDICTION_UNSPECIFIED",
                          "on": "WEIGHT_PREDICTION_ON", "off": "WEIGHT_PREDICTION_OFF"},
}

# Old spellings, still read: the strategy was called "ring" (one of its
# algorithms), and recursive doubling "tree" (the name is kept for a real
# tree algorithm; common/spec/allreduce_algorithm.h).
_OLD_NAMES = {
    "strategy": {"ring": "allreduce"},
    "algorithm": {"tree": "rd"},
}

# Files that travel with a job (client/blob_upload.cc): a prefix names a path
# on this machine, which submit uploads and replaces by its hash.
TORCHSCRIPT = "torchscript:"
TENSORS = "tensors:"
WORKER_TENSORS = "tensors-on-workers:"
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


@dataclasses.dataclass
class JobOptions:
    """A training job, as `gradsync submit`'s job flags describe it, with the
    CLI's defaults (`gradsync --help` explains each flag at length).

    strategy       "ps" (parameter server) or "allreduce" (among the
                   workers by `algorithm`; "ring", its old name, is the same)
    mode           "sync" or "async"
    staleness      async bound: ps, SSP steps ahead of the slowest (None:
                   unbounded); allreduce, allreduces in flight (None: 1)
    weight_prediction  allreduce async: "auto" (on on the CPU), "on" or "off"
                   (compute on the parameters extrapolated over the steps
                   in flight; "off" = plain delayed gradients)
    workers        world size
    ps_shards      parameter-server shards of ps jobs
    epochs, steps  passes over the training set; steps > 0 overrides epochs
    batch_size     per worker (global batch = workers x batch_size)
    lr, momentum, optimizer   "adam" or "sgd" (with momentum)
    model          "mlp:784-256-128-10", or "torchscript:PATH" (a file saved
                   by torch.jit.save, uploaded by submit)
    data           "fashion-mnist", "tensors:PATH" (uploaded by submit) or
                   "tensors-on-workers:PATH" (the same absolute path on every
                   worker; submit hashes this machine's copy)
    data_dir       the workers' Fashion-MNIST directory ("" = their default)
    seed           initial parameters and data order
    train_limit    use only the first N training samples (0 = all)
    device         "cpu" or "cuda"; tf32 allows TF32 GEMMs on cuda
    algorithm      allreduce: "auto", "ring", "hd", "rd" (recursive
                   doubling; "tree" is its old name) or "hier"
    groups         hier: a host group id per rank, "0,0,1,1"
    wire_dtype     "fp32", "bf16" or "fp16"
    tuning_file    a tuning table file (`gradsync bench --tune`) sent with
                   the job for algorithm "auto" ("" = the workers' own)
    trace          record every rank's timeline (in the job's result)
    slow_ranks     experiments: "RANK:FACTOR[,RANK:FACTOR...]", those ranks'
                   forward and backward take FACTOR (1 to 100) times as long
    name           free text shown in listings
    The rest (bucket_bytes, chunk_bytes, connections_per_peer,
    peer_bulk_bytes, ps_partition_bytes, step_timeout_ms, stall_report_ms,
    checkpoint_every, elastic, min_workers, elastic_wait_ms) as the CLI
    flags of the same names.
    """

    strategy: str = "allreduce"
    mode: str = "sync"
    staleness: Optional[int] = None
    weight_prediction: str = "auto"
    workers: int = 4
    ps_shards: int = 1
    ps_partition_bytes: int = 0
    epochs: int = 1
    steps: int = 0
    batch_size: int = 32
    lr: float = 0.001
    momentum: float = 0.9
    optimizer: str = "adam"
    model: str = "mlp:784-256-128-10"
    seed: int = 1
    data: str = "fashion-mnist"
    data_dir: str = ""
    device: str = "cpu"
    tf32: bool = False
    bucket_bytes: int = 25 << 20
    chunk_bytes: int = 1 << 20
    connections_per_peer: int = 1
    peer_bulk_bytes: int = 0
    wire_dtype: str = "fp32"
    tuning_file: str = ""
    algorithm: str = "auto"
    groups: str = ""
    step_timeout_ms: int = 30000
    stall_report_ms: int = 0
    train_limit: int = 0
    name: str = ""
    checkpoint_every: int = 0
    elastic: bool = False
    min_workers: int = 0
    elastic_wait_ms: int = 0
    trace: bool = False
    slow_ranks: str = ""

    def to_spec(self, pb):
        """The JobSpec (module `pb`, gradsync_pb2) these options describe,
        with model and data still naming local files (Client.submit uploads
        them). SpecError naming the option for an unknown name or a value of
        the wrong type; ConfigError for an unreadable tuning_file."""
        spec = pb.JobSpec()
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _NAMES:
                value = _enum(pb, f.name, value)
            elif f.name == "staleness" and value is None:
                continue
            elif f.name == "tuning_file":
                if value:
                    spec.tuning_table = _read_text(value, "tuning_file")
                continue
            elif f.name == "slow_ranks":
                for rank, factor in _slow_ranks(value):
                    spec.slow_ranks.add(rank=rank, factor=factor)
                continue
            field = "dataset" if f.name == "data" else f.name
            try:
                setattr(spec, field, value)
            except (TypeError, ValueError) as e:
                raise SpecError("%s: %r is not a valid value (%s)" % (f.name, value, e)) from None
        return spec


def _slow_ranks(text):
    """[(rank, factor)] from "RANK:FACTOR,..." ("" is none); SpecError for an
    entry that is not that shape (the coordinator checks ranks and factors)."""
    out = []
    for entry in [e for e in str(text).split(",") if e.strip()]:
        rank, sep, factor = entry.partition(":")
        try:
            out.append((int(rank), float(factor)))
        except ValueError:
            sep = ""
        if not sep:
            raise SpecError("slow_ranks: %r is not RANK:FACTOR (e.g. 2:3)" % entry)
    return out


def _enum(pb, field, text):
    names = _NAMES[field]
    old = _OLD_NAMES.get(field, {})
    if text in old:
        if field == "algorithm":
            warnings.warn("algorithm %r is recursive doubling, now spelled %r; %r will "
                          "name a real tree algorithm once it lands" % (text, old[text], text),
                          FutureWarning, stacklevel=3)
        text = old[text]
    if text not in names:
        want = " or ".join(names)
        raise SpecError("%s: unknown %s %r (want %s)" % (field, field, text, want))
    return getattr(pb, names[text])


def _read_text(path, option):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise ConfigError(grpc.StatusCode.NOT_FOUND,
                          "%s: cannot read %s (%s)" % (option, path, e.strerror)) from None


def local_file(text, prefix):
    """The path in `text` when it names a file on this machine to upload
    ("torchscript:PATH", not "torchscript:sha256:<hex>"); None otherwise."""
    if not text.startswith(prefix):
        return None
    rest = text[len(prefix):]
    return None if _SHA256.fullmatch(rest) else rest


def worker_data_path(text):
    """The path of "tensors-on-workers:PATH" before it is hashed; None for
    anything else (including the hashed form)."""
    if not text.startswith(WORKER_TENSORS) or text.startswith(WORKER_TENSORS + "sha256:"):
        return None
    return os.path.normpath(os.path.abspath(text[len(WORKER_TENSORS):]))


def enum_name(pb, field, value):
    """The text name of wire enum `value` of `field` ("ps"); "unspecified"
    for 0, as StrategyName and the like write them."""
    if value == 0:
        return "unspecified"
    for text, wire in _NAMES[field].items():
        if getattr(pb, wire) == value:
            return text
    return "unknown(%d)" % value
