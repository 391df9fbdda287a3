// One rank's job as plain options: what the worker's synchronisation,
// training and metrics layers read. The worker daemon converts the wire's
// Assignment into these once, where it accepts the job
// (common/spec/assignment_options.h); no layer below it sees a proto.
// No gRPC, no protobuf.
#ifndef GRADSYNC_COMMON_SPEC_JOB_OPTIONS_H_
#define GRADSYNC_COMMON_SPEC_JOB_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/optimizer.h"
#include "common/spec/allreduce_algorithm.h"
#include "common/wire_dtype.h"

namespace gradsync {

// The strategy that is not the PS is "allreduce" in the code; users may
// spell it --strategy=allreduce (docs/user-guide.md).
enum class SyncStrategy { kPs, kAllreduce };
enum class SyncMode { kSync, kAsync };

// A bench job's operation and sizes (JobSpec.bench; docs/user-guide.md).
enum class BenchOp { kAllreduce, kBroadcast, kPushPull };
struct BenchOptions {
  BenchOp op = BenchOp::kAllreduce;
  std::vector<int64_t> sizes;  // bytes, each a positive multiple of 4
  int iters = 0;
  int warmup = 0;
};

// One PS shard of the job.
struct PsShardOptions {
  std::string address;
  int64_t partition_bytes = 0;  // 0: PsPartitionBytesOf picks it
};

struct JobOptions {
  // Who this rank is.
  std::string job_id;
  int rank = 0;
  int world_size = 1;
  // The spec's workers: the world a PS job's partitions are picked for
  // (every generation of an elastic job cuts alike; PsPartitionBytesOf).
  int job_workers = 1;
  std::vector<std::string> peer_addresses;  // by rank
  std::vector<PsShardOptions> ps_shards;    // ps jobs; allreduce checkpoints: [0]
  // The model's layer widths (input, hidden..., output) and parameter count.
  std::vector<int> layer_widths;
  uint64_t num_params = 0;
  // Set instead: the job trains the uploaded TorchScript model with this
  // SHA-256 (layer_widths empty, num_params 0: the module fixes both).
  std::string torchscript_sha256;
  // Set: the job's data is the uploaded tensor file with this SHA-256
  // (worker/model/torch/tensor_data.h) instead of Fashion-MNIST.
  std::string data_sha256;
  // Set too: the file is not uploaded but read from this absolute path on
  // each worker, which checks its hash against data_sha256 first.
  std::string data_path;
  // Data-plane credentials (common/grpc/job_secret.h).
  std::string job_secret;
  std::string resume_secret;  // resume_from set: the old job's secret
  int resume_world = 0;       //   and world size

  // How the job synchronises.
  SyncStrategy strategy = SyncStrategy::kAllreduce;
  SyncMode mode = SyncMode::kSync;
  // Async: ps SSP bound / allreduce pipeline depth; unset = ps unbounded,
  // allreduce kDefaultAllreduceAsyncStaleness.
  std::optional<int> staleness;
  // Ring async: compute each step's gradient on parameters extrapolated over
  // the steps in flight (v1::WeightPrediction; DeviceModel::PredictParams).
  bool weight_prediction = false;
  // JobSpec.slow_ranks for this rank: its forward and backward take this
  // many times as long (1 = off; times the worker's --compute_slowdown).
  double compute_slowdown = 1.0;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  std::vector<int> groups;  // hierarchical host group by rank; empty: by host
  size_t chunk_bytes = 0;   // allreduce pipelining segment
  int64_t bucket_bytes = 0;
  WireDtype wire_dtype = WireDtype::kFp32;
  absl::Duration step_timeout = absl::Seconds(60);

  // How the job trains.
  OptimizerOptions optimizer;
  uint64_t seed = 0;
  int batch_size = 1;
  int epochs = 1;
  int64_t steps = 0;  // > 0: instead of epochs
  // PS async, not elastic: the steps (and epochs) are the job's, counted in
  // pushes the PS applied / world_size, so that a fast rank keeps training
  // while a slow one lags (GradientSync::JobPushesApplied). Elsewhere every
  // rank runs them all.
  bool job_wide_steps = false;
  int64_t train_limit = 0;  // > 0: the first this many training samples
  int64_t checkpoint_every = 0;
  std::string resume_from;  // a job id (an elastic generation's data-plane id)
  // Commit the starting state at once (elastic jobs): rank 0 of an allreduce
  // job saves a checkpoint before its first step; PS slices at Init.
  bool checkpoint_at_start = false;
  // Samples of one step over all ranks; 0 = world_size x batch_size. An
  // elastic generation with fewer ranks than the job wants keeps the job's
  // global batch: rank r takes [r*G/W, (r+1)*G/W) of each step's G samples
  // (StepPlan), and its gradient is weighted by its share.
  int64_t global_batch = 0;
  bool trace = false;

  // Where the rank computes (JobSpec.device, .tf32): on a GPU (which one is
  // the worker's choice) or on the CPU, and whether CUDA may use TF32 for
  // float32 matrix products.
  bool cuda = false;
  bool allow_tf32 = false;
  // The most samples one step gives this rank, which a GPU model sizes its
  // buffers for: ceil(global_batch / world_size) when the global batch is
  // set (an elastic generation of fewer ranks takes larger slices), else
  // batch_size.
  int max_batch = 1;

  // Bench jobs (kind bench) instead of training.
  bool is_bench = false;
  BenchOptions bench;
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SPEC_JOB_OPTIONS_H_
