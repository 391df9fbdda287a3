#include "common/spec/assignment_options.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/spec/job_spec.h"
#include "common/spec/model_spec.h"
#include "common/spec/wire_dtype_proto.h"

namespace gradsync {
namespace {

absl::Status BadAssignment(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("assignment: ", field, ": ", what));
}

// Who this rank is, who its peers and shards are, its model and credentials.
absl::Status SetRank(const v1::Assignment& a, JobOptions* o) {
  o->job_id = a.job_id();
  o->rank = a.rank();
  o->world_size = a.world_size();
  o->job_workers = std::max(a.spec().workers(), a.world_size());
  if (o->world_size < 1 || o->rank < 0 || o->rank >= o->world_size) {
    return BadAssignment("rank",
                         absl::StrCat("rank ", o->rank, " of world ", o->world_size));
  }
  o->peer_addresses.assign(a.peer_addresses().begin(), a.peer_addresses().end());
  for (const v1::PsShardInfo& s : a.ps_shards()) {
    o->ps_shards.push_back({s.address(), static_cast<int64_t>(s.partition_bytes())});
  }
  o->layer_widths.assign(a.layer_widths().begin(), a.layer_widths().end());
  o->num_params = a.num_params();
  if (IsTorchScriptModel(a.spec().model())) {
    absl::StatusOr<std::string> hash = TorchScriptHashOf(a.spec().model());
    if (!hash.ok()) return BadAssignment("model", std::string(hash.status().message()));
    o->torchscript_sha256 = *hash;
  }
  if (IsTensorData(a.spec().dataset())) {
    absl::StatusOr<std::string> hash = TensorDataHashOf(a.spec().dataset());
    if (!hash.ok()) return BadAssignment("dataset", std::string(hash.status().message()));
    o->data_sha256 = *hash;
  } else if (IsWorkerTensorData(a.spec().dataset())) {
    absl::StatusOr<WorkerTensorData> d = WorkerTensorDataOf(a.spec().dataset());
    if (!d.ok()) return BadAssignment("dataset", std::string(d.status().message()));
    o->data_sha256 = d->sha256;
    o->data_path = d->path;
  }
  o->job_secret = a.job_secret();
  o->resume_secret = a.resume_secret();
  o->resume_world = a.resume_world();
  return absl::OkStatus();
}

// Strategy, mode and the data path's settings.
absl::Status SetSync(const v1::JobSpec& spec, int world, JobOptions* o) {
  switch (spec.strategy()) {
    case v1::STRATEGY_PS:
      o->strategy = SyncStrategy::kPs;
      break;
    case v1::STRATEGY_UNSPECIFIED:  // bench jobs: ValidateJobSpec's default
    case v1::STRATEGY_ALLREDUCE:
      o->strategy = SyncStrategy::kAllreduce;
      break;
    default:
      return BadAssignment("strategy",
                           absl::StrCat("unknown ", StrategyName(spec.strategy())));
  }
  switch (spec.mode()) {
    case v1::SYNC_MODE_UNSPECIFIED:  // bench jobs: ValidateJobSpec's default
    case v1::SYNC_MODE_SYNC:
      o->mode = SyncMode::kSync;
      break;
    case v1::SYNC_MODE_ASYNC:
      o->mode = SyncMode::kAsync;
      break;
    default:
      return BadAssignment("mode", absl::StrCat("unknown ", SyncModeName(spec.mode())));
  }
  if (spec.has_staleness()) o->staleness = spec.staleness();
  o->weight_prediction = spec.weight_prediction() == v1::WEIGHT_PREDICTION_ON;
  for (const v1::RankSlowdown& r : spec.slow_ranks()) {
    if (r.rank() == o->rank) o->compute_slowdown = r.factor();
  }
  o->algorithm = AllreduceAlgorithmOf(spec.algorithm());
  absl::StatusOr<std::vector<int>> groups = ParseGroups(spec.groups(), world);
  if (!groups.ok()) return groups.status();
  o->groups = *std::move(groups);
  o->chunk_bytes = static_cast<size_t>(std::max<int64_t>(0, spec.chunk_bytes()));
  o->bucket_bytes = spec.bucket_bytes();
  absl::StatusOr<WireDtype> dtype = WireDtypeOf(spec.wire_dtype());
  if (!dtype.ok())
    return BadAssignment("wire_dtype", std::string(dtype.status().message()));
  o->wire_dtype = *dtype;
  o->step_timeout = StepTimeout(spec);
  return absl::OkStatus();
}

// A bench job's operation and sizes.
absl::Status SetBench(const v1::BenchSpec& bench, JobOptions* o) {
  switch (bench.op()) {
    case v1::BENCH_OP_ALLREDUCE:
      o->bench.op = BenchOp::kAllreduce;
      break;
    case v1::BENCH_OP_BROADCAST:
      o->bench.op = BenchOp::kBroadcast;
      break;
    case v1::BENCH_OP_PUSHPULL:
      o->bench.op = BenchOp::kPushPull;
      break;
    default:
      return BadAssignment("bench.op",
                           absl::StrCat("unknown op ", static_cast<int>(bench.op())));
  }
  o->bench.sizes.assign(bench.sizes().begin(), bench.sizes().end());
  o->bench.iters = bench.iters();
  o->bench.warmup = bench.warmup();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobOptions> JobOptionsOf(const v1::Assignment& a) {
  const v1::JobSpec& spec = a.spec();
  JobOptions o;
  if (absl::Status st = SetRank(a, &o); !st.ok()) return st;
  if (absl::Status st = SetSync(spec, a.world_size(), &o); !st.ok()) return st;
  o.optimizer = OptimizerFromSpec(spec);
  o.seed = spec.seed();
  o.batch_size = spec.batch_size();
  o.epochs = spec.epochs();
  o.steps = spec.steps();
  o.job_wide_steps = spec.strategy() == v1::STRATEGY_PS &&
                     spec.mode() == v1::SYNC_MODE_ASYNC && !spec.elastic();
  o.train_limit = spec.train_limit();
  o.checkpoint_every = spec.checkpoint_every();
  o.resume_from = a.resume_job_id().empty() ? spec.resume_from() : a.resume_job_id();
  o.checkpoint_at_start = a.checkpoint_at_start();
  o.global_batch = a.global_batch();
  if (o.global_batch < 0 ||
      (o.global_batch > 0 && o.global_batch < static_cast<int64_t>(o.world_size))) {
    return BadAssignment("global_batch",
                         absl::StrCat(o.global_batch, " samples cannot be split over ",
                                      o.world_size, " ranks"));
  }
  o.trace = spec.trace();
  o.cuda = spec.device() == v1::DEVICE_CUDA;
  o.allow_tf32 = spec.tf32();
  o.max_batch = o.global_batch > 0
                    ? static_cast<int>((o.global_batch + o.world_size - 1) /
                                       std::max(1, o.world_size))
                    : o.batch_size;
  o.is_bench = IsBench(spec);
  if (o.is_bench) {
    if (absl::Status st = SetBench(spec.bench(), &o); !st.ok()) return st;
  }
  return o;
}

}  // namespace gradsync
