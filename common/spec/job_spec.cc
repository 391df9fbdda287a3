#include "common/spec/job_spec.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/spec/spec_enum_names.h"
#include "common/spec/tuning_table.h"

namespace gradsync {

using spec_internal::Bad;
using spec_internal::kAlgorithms;
using spec_internal::kBenchOps;
using spec_internal::kDevices;
using spec_internal::kModes;
using spec_internal::Known;
using spec_internal::kOptimizers;
using spec_internal::kStrategies;
using spec_internal::kWeightPredictions;
using spec_internal::kWireDtypes;

namespace {

// Weight prediction (v1::WeightPrediction), after strategy, mode and device:
// resolves UNSPECIFIED to on for ring async training on the CPU.
absl::Status ValidateWeightPrediction(v1::JobSpec* s) {
  absl::StatusOr<v1::WeightPrediction> w =
      Known(kWeightPredictions, "weight_prediction", s->weight_prediction(),
            v1::WEIGHT_PREDICTION_UNSPECIFIED);
  if (!w.ok()) return w.status();
  const bool ring_async = !IsBench(*s) && s->strategy() == v1::STRATEGY_ALLREDUCE &&
                          s->mode() == v1::SYNC_MODE_ASYNC;
  const bool cpu = s->device() == v1::DEVICE_CPU;
  if (*w == v1::WEIGHT_PREDICTION_UNSPECIFIED) {
    *w = ring_async && cpu ? v1::WEIGHT_PREDICTION_ON : v1::WEIGHT_PREDICTION_OFF;
  }
  if (*w == v1::WEIGHT_PREDICTION_ON && !ring_async) {
    return Bad("weight_prediction",
               "only allreduce async training computes on parameters a fixed number of "
               "steps old; use weight_prediction=off or auto");
  }
  if (*w == v1::WEIGHT_PREDICTION_ON && !cpu) {
    return Bad("weight_prediction",
               "the CUDA backend does not predict parameters; use "
               "weight_prediction=off or auto");
  }
  s->set_weight_prediction(*w);
  return absl::OkStatus();
}

// Strategy, mode and staleness; fills their defaults into *s.
absl::Status ValidateSwitches(v1::JobSpec* s) {
  absl::StatusOr<v1::Strategy> strategy =
      Known(kStrategies, "strategy", s->strategy(), v1::STRATEGY_ALLREDUCE);
  if (!strategy.ok()) return strategy.status();
  s->set_strategy(*strategy);
  absl::StatusOr<v1::SyncMode> mode =
      Known(kModes, "mode", s->mode(), v1::SYNC_MODE_SYNC);
  if (!mode.ok()) return mode.status();
  s->set_mode(*mode);
  if (s->has_staleness() && s->staleness() < 0) {
    return Bad("staleness", absl::StrCat("must be >= 0, got ", s->staleness()));
  }
  const bool ring_async =
      s->strategy() == v1::STRATEGY_ALLREDUCE && s->mode() == v1::SYNC_MODE_ASYNC;
  if (ring_async && !s->has_staleness()) {
    s->set_staleness(kDefaultAllreduceAsyncStaleness);
  }
  if (ring_async && s->staleness() == 0) {
    return Bad("staleness", "allreduce async needs staleness >= 1 (0 is allreduce sync)");
  }
  if (ring_async && s->staleness() > kMaxAllreduceAsyncStaleness) {
    return Bad("staleness", absl::StrCat("allreduce async allows at most ",
                                         kMaxAllreduceAsyncStaleness,
                                         " steps in flight, got ", s->staleness()));
  }
  absl::StatusOr<v1::Device> device =
      Known(kDevices, "device", s->device(), v1::DEVICE_CPU);
  if (!device.ok()) return device.status();
  s->set_device(*device);
  absl::StatusOr<v1::Algorithm> algorithm =
      Known(kAlgorithms, "algorithm", s->algorithm(), v1::ALGORITHM_AUTO);
  if (!algorithm.ok()) return algorithm.status();
  s->set_algorithm(*algorithm);
  absl::StatusOr<v1::WireDtype> wire =
      Known(kWireDtypes, "wire_dtype", s->wire_dtype(), v1::WIRE_DTYPE_FP32);
  if (!wire.ok()) return wire.status();
  s->set_wire_dtype(*wire);
  return ValidateWeightPrediction(s);
}

// Dataset and model, which must fit the dataset's shape.
absl::Status ValidateModel(v1::JobSpec* s) {
  if (s->dataset().empty()) s->set_dataset("fashion-mnist");
  if (s->model().empty()) s->set_model(kDefaultModel);
  if (IsTensorData(s->dataset()) || IsWorkerTensorData(s->dataset())) {
    const absl::Status parsed = IsTensorData(s->dataset())
                                    ? TensorDataHashOf(s->dataset()).status()
                                    : WorkerTensorDataOf(s->dataset()).status();
    if (!parsed.ok()) return parsed;
    if (!IsTorchScriptModel(s->model())) {
      return Bad("dataset",
                 "a tensors: data set trains a TorchScript model "
                 "(--model=torchscript:PATH); the built-in MLP's widths are "
                 "checked against fashion-mnist");
    }
  } else if (s->dataset() != "fashion-mnist") {
    return Bad(
        "dataset",
        absl::StrCat("unknown dataset '", s->dataset(),
                     "' (want fashion-mnist, tensors:PATH or tensors-on-workers:PATH)"));
  }
  if (IsTorchScriptModel(s->model())) {
    // Its fit to the data is checked by each worker when it loads it.
    absl::StatusOr<std::string> hash = TorchScriptHashOf(s->model());
    if (!hash.ok()) return hash.status();
    if (s->device() == v1::DEVICE_CUDA) {
      return Bad("model",
                 "TorchScript models train on the CPU (Debian's libtorch has "
                 "no CUDA); use device=cpu");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<MlpSpec> model = ParseModelSpec(s->model());
  if (!model.ok()) return Bad("model", std::string(model.status().message()));
  if (model->widths.front() != kFashionMnistFeatures) {
    return Bad("model", absl::StrCat("input width ", model->widths.front(),
                                     " does not match fashion-mnist's ",
                                     kFashionMnistFeatures, " features"));
  }
  if (model->widths.back() != kFashionMnistClasses) {
    return Bad("model", absl::StrCat("output width ", model->widths.back(),
                                     " does not match fashion-mnist's ",
                                     kFashionMnistClasses, " classes"));
  }
  if (NumParams(*model) > kMaxParams) {
    return Bad("model", absl::StrCat(s->model(), " has ", NumParams(*model),
                                     " parameters, over the cap of ", kMaxParams));
  }
  return absl::OkStatus();
}

// Optimizer, learning rate and momentum.
absl::Status ValidateOptimizer(v1::JobSpec* s) {
  absl::StatusOr<v1::Optimizer> optimizer =
      Known(kOptimizers, "optimizer", s->optimizer(), v1::OPTIMIZER_SGD);
  if (!optimizer.ok()) return optimizer.status();
  s->set_optimizer(*optimizer);
  if (!std::isfinite(s->lr()) || s->lr() < 0) {
    return Bad("lr", absl::StrCat("must be a positive number, got ", s->lr()));
  }
  if (s->lr() == 0) {
    s->set_lr(s->optimizer() == v1::OPTIMIZER_ADAM ? kDefaultAdamLr : kDefaultSgdLr);
  }
  if (!std::isfinite(s->momentum()) || s->momentum() < 0 || s->momentum() >= 1) {
    return Bad("momentum", absl::StrCat("must be in [0, 1), got ", s->momentum()));
  }
  return absl::OkStatus();
}

// Counts, sizes and timeouts.
absl::Status ValidateSizes(v1::JobSpec* s, int available_ps_shards) {
  if (!IsBench(*s)) {
    if (s->batch_size() <= 0) {
      return Bad("batch_size", absl::StrCat("must be >= 1, got ", s->batch_size()));
    }
    if (s->epochs() < 0) return Bad("epochs", "must be >= 0");
    if (s->steps() < 0) return Bad("steps", "must be >= 0");
    if (s->epochs() == 0 && s->steps() == 0) s->set_epochs(1);
  }
  if (s->ps_shards() < 0) return Bad("ps_shards", "must be >= 0");
  if (s->ps_shards() == 0) s->set_ps_shards(1);
  if (UsesPs(*s) && s->ps_shards() > available_ps_shards) {
    return Bad("ps_shards",
               absl::StrCat("job wants ", s->ps_shards(),
                            " parameter-server shards but the coordinator has ",
                            available_ps_shards,
                            " (start more with --role=ps and list them in "
                            "--ps_shards of the coordinator)"));
  }
  if (s->bucket_bytes() < 0) return Bad("bucket_bytes", "must be >= 0");
  if (s->bucket_bytes() == 0) s->set_bucket_bytes(kDefaultBucketBytes);
  if (s->chunk_bytes() < 0) return Bad("chunk_bytes", "must be >= 0");
  if (s->chunk_bytes() == 0) s->set_chunk_bytes(kDefaultChunkBytes);
  if (s->chunk_bytes() < 4) return Bad("chunk_bytes", "must be >= 4");
  if (s->ps_partition_bytes() < 0) return Bad("ps_partition_bytes", "must be >= 0");
  // 0: PickPsPartitionBytes's size (ValidatePsPartitions).
  if (s->ps_partition_bytes() != 0 &&
      (s->ps_partition_bytes() < static_cast<int64_t>(kMinPsPartitionBytes) ||
       s->ps_partition_bytes() > static_cast<int64_t>(kPsPartitionBytes))) {
    return Bad(
        "ps_partition_bytes",
        absl::StrCat("must be between ", kMinPsPartitionBytes, " (64 KiB) and ",
                     kPsPartitionBytes, " (4 MiB), got ", s->ps_partition_bytes()));
  }
  if (s->connections_per_peer() < 0) {
    return Bad("connections_per_peer", "must be >= 0");
  }
  if (s->connections_per_peer() == 0) s->set_connections_per_peer(1);
  if (s->peer_bulk_bytes() < -1) {
    return Bad("peer_bulk_bytes", "must be >= 0, or -1 for never");
  }
  if (s->peer_bulk_bytes() == 0) s->set_peer_bulk_bytes(kDefaultPeerBulkBytes);
  if (s->step_timeout_ms() < 0) return Bad("step_timeout_ms", "must be >= 0");
  if (s->step_timeout_ms() == 0) s->set_step_timeout_ms(kDefaultStepTimeoutMs);
  if (s->stall_report_ms() < 0) return Bad("stall_report_ms", "must be >= 0");
  if (s->stall_report_ms() > s->step_timeout_ms()) {
    return Bad("stall_report_ms", "must not exceed step_timeout_ms");
  }
  if (s->stall_report_ms() == 0) {
    s->set_stall_report_ms(std::max(1, s->step_timeout_ms() / 2));
  }
  if (s->train_limit() < 0) return Bad("train_limit", "must be >= 0");
  if (!IsBench(*s) && s->train_limit() > 0 &&
      s->train_limit() < static_cast<int64_t>(s->workers()) * s->batch_size()) {
    return Bad("train_limit", "smaller than one global batch");
  }
  return absl::OkStatus();
}

// PS jobs: every rank but 0 asks each shard for the initial value of all its
// partitions at once and those pulls may wait for rank 0's Init; a shard
// keeps at most kMaxShardPendingPulls waiting. Refuses a job whose
// partitions (at least ceil(bytes / ps_partition_bytes): exact for a bench,
// whose vector is one bucket; training buckets can add one each) would
// exceed that. Runs after ValidateSizes.
// A job that names no partition size keeps 0 here: PickPsPartitionBytes
// (common/ps_layout.h) picks it once the job is placed, since whether its
// workers share one host decides (JobTable::Place writes it into the spec
// of a training job; a bench's workers pick per size). The check takes the
// pick for workers on several hosts, the smaller one, which keeps within
// half of that limit (training buckets can add partitions, and other jobs
// may share the shard).
absl::Status ValidatePsPartitions(v1::JobSpec* spec) {
  const v1::JobSpec& s = *spec;
  if (!UsesPs(s)) return absl::OkStatus();
  int64_t bytes = 0;
  if (IsBench(s)) {
    for (int64_t b : s.bench().sizes()) bytes = std::max(bytes, b);
  } else {
    absl::StatusOr<MlpSpec> model = ParseModelSpec(s.model());
    if (!model.ok()) return absl::OkStatus();  // TorchScript, or ValidateModel's
    bytes = static_cast<int64_t>(NumParams(*model) * sizeof(float));
  }
  const int64_t partition =
      s.ps_partition_bytes() > 0
          ? s.ps_partition_bytes()
          : static_cast<int64_t>(PickPsPartitionBytes(static_cast<uint64_t>(bytes),
                                                      s.ps_shards(), s.workers()));
  const int64_t partitions = (bytes + partition - 1) / partition;
  const int64_t per_shard = (partitions + s.ps_shards() - 1) / s.ps_shards();
  const int64_t waiting = per_shard * (s.workers() - 1);
  if (waiting > static_cast<int64_t>(kMaxShardPendingPulls)) {
    const bool largest = partition >= static_cast<int64_t>(kPsPartitionBytes);
    return Bad(
        "ps_partition_bytes",
        absl::StrCat(bytes, " bytes in partitions of ", partition, " bytes over ",
                     s.ps_shards(), " shards make up to ", per_shard,
                     " partitions per shard, and ", s.workers() - 1,
                     " workers waiting on each would exceed a shard's ",
                     kMaxShardPendingPulls, " pending pulls; use ",
                     largest ? "more shards" : "larger partitions or more shards"));
  }
  return absl::OkStatus();
}

// Bench jobs: op, sizes, iterations.
absl::Status ValidateBench(v1::JobSpec* s) {
  v1::BenchSpec* b = s->mutable_bench();
  if (b->op() == v1::BENCH_OP_UNSPECIFIED) {
    return Bad("bench.op", "must be set (allreduce, broadcast or pushpull)");
  }
  absl::StatusOr<v1::BenchOp> op =
      Known(kBenchOps, "bench.op", b->op(), v1::BENCH_OP_ALLREDUCE);
  if (!op.ok()) return op.status();
  if (s->trace()) {
    return Bad("trace", "bench jobs record no timeline (trace is for training)");
  }
  if (*op == v1::BENCH_OP_PUSHPULL && s->wire_dtype() != v1::WIRE_DTYPE_FP32) {
    return Bad("wire_dtype", "pushpull benches check exact float32 parameters; use fp32");
  }
  if (b->sizes_size() == 0) return Bad("bench.sizes", "no sizes");
  if (b->sizes_size() > kMaxBenchSizes) {
    return Bad("bench.sizes", absl::StrCat(b->sizes_size(), " sizes is over the cap of ",
                                           kMaxBenchSizes));
  }
  for (int64_t bytes : b->sizes()) {
    if (bytes < 4 || bytes % 4 != 0) {
      return Bad("bench.sizes", absl::StrCat(bytes,
                                             " bytes is not a positive multiple of 4 "
                                             "(float32 elements)"));
    }
    if (bytes > kMaxBenchBytes) {
      return Bad("bench.sizes",
                 absl::StrCat(bytes, " bytes is over the cap of ", kMaxBenchBytes));
    }
  }
  if (b->iters() < 1 || b->iters() > kMaxBenchIters) {
    return Bad("bench.iters",
               absl::StrCat("must be in [1, ", kMaxBenchIters, "], got ", b->iters()));
  }
  if (b->warmup() < 0 || b->warmup() > kMaxBenchWarmup) {
    return Bad("bench.warmup",
               absl::StrCat("must be in [0, ", kMaxBenchWarmup, "], got ", b->warmup()));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The caps that bound what a spec can make a daemon allocate or wait for.
absl::Status ValidateCaps(const v1::JobSpec& s) {
  auto over = [](const std::string& field, auto value, auto cap) {
    return Bad(field, absl::StrCat(value, " is over the cap of ", cap));
  };
  if (s.name().size() > kMaxNameBytes) {
    return over("name", absl::StrCat(s.name().size(), " bytes"), kMaxNameBytes);
  }
  if (s.data_dir().size() > kMaxPathBytes) {
    return over("data_dir", absl::StrCat(s.data_dir().size(), " bytes"), kMaxPathBytes);
  }
  if (s.model().size() > kMaxModelBytes) {
    return over("model", absl::StrCat(s.model().size(), " bytes"), kMaxModelBytes);
  }
  if (s.tuning_table().size() > kMaxTuningTableBytes) {
    return over("tuning_table", absl::StrCat(s.tuning_table().size(), " bytes"),
                kMaxTuningTableBytes);
  }
  if (s.workers() > kMaxWorkers) return over("workers", s.workers(), kMaxWorkers);
  if (s.batch_size() > kMaxBatchSize) {
    return over("batch_size", s.batch_size(), kMaxBatchSize);
  }
  if (s.ps_shards() > kMaxPsShards) {
    return over("ps_shards", s.ps_shards(), kMaxPsShards);
  }
  if (s.epochs() > kMaxEpochs) return over("epochs", s.epochs(), kMaxEpochs);
  if (s.steps() > kMaxSteps) return over("steps", s.steps(), kMaxSteps);
  if (s.bucket_bytes() > kMaxBucketBytes) {
    return over("bucket_bytes", s.bucket_bytes(), kMaxBucketBytes);
  }
  if (s.connections_per_peer() > kMaxConnectionsPerPeer) {
    return over("connections_per_peer", s.connections_per_peer(), kMaxConnectionsPerPeer);
  }
  if (s.chunk_bytes() > kMaxChunkBytes) {
    return over("chunk_bytes", s.chunk_bytes(), kMaxChunkBytes);
  }
  if (s.step_timeout_ms() > kMaxStepTimeoutMs) {
    return over("step_timeout_ms", s.step_timeout_ms(), kMaxStepTimeoutMs);
  }
  if (s.has_staleness() && s.staleness() > kMaxSspStaleness) {
    return over("staleness", s.staleness(), kMaxSspStaleness);
  }
  return absl::OkStatus();
}

// Why a training job cannot checkpoint, or nullptr when it can (ps sync,
// ps async, ring sync and async on the CPU; a ring async checkpoint after
// step t holds the gradients of steps < t only, and a run resumed from it
// restarts its pipeline at t).
const char* NoCheckpoints(const v1::JobSpec& s) {
  if (IsBench(s)) return "bench jobs do not checkpoint or resume";
  if (s.strategy() != v1::STRATEGY_ALLREDUCE) return nullptr;
  if (s.device() == v1::DEVICE_CUDA) {
    return "allreduce jobs on cuda do not checkpoint: the CUDA model does not "
           "export its optimizer state";
  }
  return nullptr;
}

// checkpoint_every and resume_from: training jobs of ps (sync, async) and
// ring sync on the CPU; resume_from is a job id (it names a directory on the
// shards).
absl::Status ValidateCheckpoints(const v1::JobSpec& s) {
  const bool wanted = s.checkpoint_every() != 0 || !s.resume_from().empty();
  if (!wanted) return absl::OkStatus();
  if (s.checkpoint_every() < 0) {
    return Bad("checkpoint_every",
               absl::StrCat("must be >= 0, got ", s.checkpoint_every()));
  }
  const char* field = s.checkpoint_every() != 0 ? "checkpoint_every" : "resume_from";
  if (const char* why = NoCheckpoints(s); why != nullptr) return Bad(field, why);
  const std::string& id = s.resume_from();
  if (id.size() > kMaxNameBytes || (!id.empty() && id[0] == '.') ||
      id.find_first_of("/\\") != std::string::npos) {
    return Bad("resume_from", absl::StrCat("'", id, "' is not a job id"));
  }
  return absl::OkStatus();
}

// elastic, min_workers, elastic_wait_ms; an elastic job commits every
// checkpoint_every steps (default kDefaultElasticCheckpointEvery).
absl::Status ValidateElastic(v1::JobSpec* s) {
  if (!s->elastic()) {
    if (s->min_workers() != 0)
      return Bad("min_workers", "set on a job that is not elastic");
    if (s->elastic_wait_ms() != 0) {
      return Bad("elastic_wait_ms", "set on a job that is not elastic");
    }
    return absl::OkStatus();
  }
  if (IsBench(*s)) return Bad("elastic", "bench jobs are not elastic");
  if (!s->groups().empty()) {
    return Bad("elastic",
               "an elastic job's ranks change; it cannot fix `groups` per rank");
  }
  if (s->min_workers() == 0) s->set_min_workers(1);
  if (s->min_workers() < 1 || s->min_workers() > s->workers()) {
    return Bad(
        "min_workers",
        absl::StrCat(s->min_workers(), " is outside [1, workers = ", s->workers(), "]"));
  }
  if (s->elastic_wait_ms() == 0) s->set_elastic_wait_ms(kDefaultElasticWaitMs);
  if (s->elastic_wait_ms() < 0 || s->elastic_wait_ms() > kMaxElasticWaitMs) {
    return Bad("elastic_wait_ms", absl::StrCat(s->elastic_wait_ms(), " is outside [1, ",
                                               kMaxElasticWaitMs, "]"));
  }
  if (const char* why = NoCheckpoints(*s); why != nullptr) {
    return Bad("elastic",
               absl::StrCat("an elastic job resumes from checkpoints, but ", why));
  }
  if (s->checkpoint_every() == 0) s->set_checkpoint_every(kDefaultElasticCheckpointEvery);
  return absl::OkStatus();
}

}  // namespace

namespace {

// slow_ranks: each rank once, within the job's workers, each factor 1..100;
// training jobs only.
absl::Status ValidateSlowRanks(const v1::JobSpec& s) {
  if (s.slow_ranks_size() == 0) return absl::OkStatus();
  if (IsBench(s))
    return Bad("slow_ranks", "bench jobs do not train; set it on a training job");
  std::vector<bool> seen(s.workers(), false);
  for (const v1::RankSlowdown& r : s.slow_ranks()) {
    if (r.rank() < 0 || r.rank() >= s.workers()) {
      return Bad("slow_ranks",
                 absl::StrCat("rank ", r.rank(), " is not one of the job's ", s.workers(),
                              " ranks (0 to ", s.workers() - 1, ")"));
    }
    if (!(r.factor() >= 1 && r.factor() <= 100)) {
      return Bad("slow_ranks", absl::StrCat("rank ", r.rank(), ": factor ", r.factor(),
                                            " is not from 1 (off) to 100"));
    }
    if (seen[r.rank()]) {
      return Bad("slow_ranks", absl::StrCat("rank ", r.rank(), " is given twice"));
    }
    seen[r.rank()] = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::JobSpec> ValidateJobSpec(const v1::JobSpec& in,
                                            int available_ps_shards) {
  v1::JobSpec s = in;
  if (s.workers() <= 0) {
    return Bad("workers", absl::StrCat("must be >= 1, got ", s.workers()));
  }
  // kind stays UNSPECIFIED for training jobs (it means train).
  if (s.kind() != v1::JOB_KIND_UNSPECIFIED && s.kind() != v1::JOB_KIND_TRAIN &&
      s.kind() != v1::JOB_KIND_BENCH) {
    return Bad("kind", absl::StrCat("unknown value ", static_cast<int>(s.kind())));
  }
  if (!IsBench(s) && s.has_bench()) {
    return Bad("bench", "set on a job whose kind is not bench");
  }
  absl::Status st = ValidateCaps(s);
  if (st.ok()) st = ValidateSwitches(&s);
  if (st.ok()) st = IsBench(s) ? ValidateBench(&s) : ValidateModel(&s);
  if (st.ok()) st = ValidateOptimizer(&s);
  if (st.ok()) st = ValidateSizes(&s, available_ps_shards);
  if (st.ok()) st = ValidatePsPartitions(&s);
  if (st.ok()) st = ParseGroups(s.groups(), s.workers()).status();
  // Errors read "tuning_table:LINE: what is wrong".
  if (st.ok() && !s.tuning_table().empty()) {
    st = TuningTable::Parse(s.tuning_table(), "tuning_table").status();
  }
  if (st.ok()) st = ValidateElastic(&s);
  if (st.ok()) st = ValidateCheckpoints(s);
  if (st.ok()) st = ValidateSlowRanks(s);
  if (!st.ok()) return st;
  return s;
}

absl::StatusOr<std::vector<v1::RankSlowdown>> ParseSlowRanks(absl::string_view text) {
  std::vector<v1::RankSlowdown> out;
  if (absl::StripAsciiWhitespace(text).empty()) return out;
  if (text.size() > static_cast<size_t>(kMaxWorkers) * 16) {
    return Bad("slow_ranks",
               absl::StrCat(text.size(), " bytes is over the cap of ", kMaxWorkers * 16));
  }
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(entry, ':');
    int rank = -1;
    double factor = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &rank) ||
        !absl::SimpleAtod(parts[1], &factor)) {
      return Bad("slow_ranks", absl::StrCat("'", entry,
                                            "' is not RANK:FACTOR (e.g. 2:3 for rank 2 "
                                            "computing 3x as long)"));
    }
    v1::RankSlowdown r;
    r.set_rank(rank);
    r.set_factor(factor);
    out.push_back(r);
  }
  v1::JobSpec probe;
  for (const v1::RankSlowdown& r : out) *probe.add_slow_ranks() = r;
  probe.set_workers(kMaxWorkers);
  if (absl::Status st = ValidateSlowRanks(probe); !st.ok()) return st;
  return out;
}

std::string SlowRanksText(const v1::JobSpec& spec) {
  std::vector<std::string> parts;
  for (const v1::RankSlowdown& r : spec.slow_ranks()) {
    parts.push_back(absl::StrCat(r.rank(), ":", r.factor()));
  }
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<std::vector<int>> ParseGroups(absl::string_view text, int workers) {
  std::vector<int> groups;
  if (absl::StripAsciiWhitespace(text).empty()) return groups;
  if (text.size() > static_cast<size_t>(kMaxWorkers) * 8) {
    return Bad("groups",
               absl::StrCat(text.size(), " bytes is over the cap of ", kMaxWorkers * 8));
  }
  for (absl::string_view id : absl::StrSplit(text, ',')) {
    int g = -1;
    if (!absl::SimpleAtoi(id, &g) || g < 0 || g >= kMaxWorkers) {
      return Bad("groups", absl::StrCat("'", id, "' (entry ", groups.size() + 1,
                                        ") is not a group id in [0, ", kMaxWorkers, ")"));
    }
    groups.push_back(g);
  }
  if (static_cast<int>(groups.size()) != workers) {
    return Bad("groups", absl::StrCat(groups.size(), " group ids for ", workers,
                                      " workers (want one per rank)"));
  }
  return groups;
}

}  // namespace gradsync
