// Validation of submitted JobSpecs, the defaults filled into them, and the
// text names of the job's switches (used only by the CLI and results files).
#ifndef GRADSYNC_COMMON_SPEC_JOB_SPEC_H_
#define GRADSYNC_COMMON_SPEC_JOB_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/message_limits.h"
#include "common/optimizer.h"
#include "common/spec/allreduce_algorithm.h"
#include "common/spec/job_limits.h"
#include "common/spec/model_spec.h"
#include "common/wire_dtype.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// The defaults and caps (kDefault*, kMax*) are in common/spec/job_limits.h.

// Returns the spec with defaults filled in (strategy ring, mode sync, model
// kDefaultModel, dataset "fashion-mnist", optimizer sgd, algorithm auto, lr kDefaultSgdLr or
// kDefaultAdamLr, epochs 1 when neither epochs nor steps is set, device cpu,
// ps_shards 1, the k* defaults above; ring+async staleness
// kDefaultAllreduceAsyncStaleness).
// INVALID_ARGUMENT naming the field for: workers <= 0, unknown strategy, mode,
// model, dataset, optimizer or device, batch_size <= 0, a model whose input /
// output widths do not match the dataset, staleness < 0, lr < 0 or not finite,
// momentum outside [0, 1), epochs or steps < 0, allreduce-async staleness above
// kMaxAllreduceAsyncStaleness, or any value beyond the caps above, ps_shards < 0 or more than
// `available_ps_shards`, negative sizes, bad groups (ParseGroups),
// checkpoint_every < 0, checkpoint_every or resume_from on a bench job, a
// ring async job or a ring job on cuda (each with its reason), a
// resume_from that is not a job id (starts with '.', has '/' or '\\').
// Bench jobs (kind = bench) skip the model, dataset, batch and epoch checks
// (no model is built) and instead need: bench.op allreduce, broadcast or
// pushpull; 1..kMaxBenchSizes sizes, each a multiple of 4 in
// [4, kMaxBenchBytes]; iters in [1, kMaxBenchIters]; warmup in
// [0, kMaxBenchWarmup]; pushpull: ps_shards <= `available_ps_shards`.
// Errors name the field ("bench.sizes: ...").
absl::StatusOr<v1::JobSpec> ValidateJobSpec(const v1::JobSpec& spec,
                                            int available_ps_shards);

// True for a bench job (kind = bench).
bool IsBench(const v1::JobSpec& spec);

// True when a validated job talks to parameter-server shards: ps-strategy
// training jobs and pushpull bench jobs.
bool UsesPs(const v1::JobSpec& spec);

// "allreduce", "broadcast", "pushpull"; parsed back by ParseBenchOp
// (INVALID_ARGUMENT "op: unknown op 'x' (want ...)").
std::string BenchOpName(v1::BenchOp op);
absl::StatusOr<v1::BenchOp> ParseBenchOp(absl::string_view text);

// The per-step communication deadline of a validated spec.
absl::Duration StepTimeout(const v1::JobSpec& spec);
// How long a worker waits for one peer or PS shard before it reports a stall
// (stall_report_ms; unset: half the step timeout).
absl::Duration StallThreshold(const v1::JobSpec& spec);
// A worker's stall report as one line, e.g. "rank 1 waiting 15.2 s for rank
// 3 (127.0.0.1:7003) at step 42 bucket 0 reduce-scatter"; resolved: "rank 1
// waited 15.2 s for ... (resolved)". Written by the worker's log, the
// coordinator's Job.stalls and events alike.
std::string StallText(const v1::WorkerMessage::Stall& s);

// The optimizer a validated spec asks for.
OptimizerOptions OptimizerFromSpec(const v1::JobSpec& spec);

// The optimizer kind of a wire value; INVALID_ARGUMENT naming "optimizer" for
// anything but sgd and adam.
absl::StatusOr<OptimizerKind> ToOptimizerKind(v1::Optimizer o);

// Text names: "ps" / "allreduce", "sync" / "async", "cpu" / "cuda", "sgd" /
// "adam"; "unspecified" for the zero value, "unknown(N)" for values out of
// range.
std::string StrategyName(v1::Strategy s);
std::string SyncModeName(v1::SyncMode m);
std::string DeviceName(v1::Device d);
std::string OptimizerName(v1::Optimizer o);
// "auto", "ring", "hd" (halving-doubling), "rd" (recursive doubling), "hier"
// (hierarchical).
std::string AlgorithmName(v1::Algorithm a);
// "fp32", "bf16", "fp16".
std::string WireDtypeName(v1::WireDtype d);
// "on", "off" ("unspecified" before validation resolves it).
std::string WeightPredictionName(v1::WeightPrediction w);

// Parses the text names above. INVALID_ARGUMENT starting with the field name
// ("strategy: unknown strategy 'x' (want ps or allreduce or ring)").
// ParseStrategy also takes the strategy's old name "ring", ParseAlgorithm
// recursive doubling's old name "tree" (kOldRecursiveDoublingName).
absl::StatusOr<v1::Strategy> ParseStrategy(absl::string_view text);
absl::StatusOr<v1::SyncMode> ParseSyncMode(absl::string_view text);
absl::StatusOr<v1::Device> ParseDevice(absl::string_view text);
absl::StatusOr<v1::Optimizer> ParseOptimizer(absl::string_view text);
absl::StatusOr<v1::Algorithm> ParseAlgorithm(absl::string_view text);
// The wire's algorithm as the collectives know it (UNSPECIFIED is kAuto,
// ALGORITHM_RECURSIVE_DOUBLING is kRecursiveDoubling), and back.
AllreduceAlgorithm AllreduceAlgorithmOf(v1::Algorithm algorithm);
v1::Algorithm WireAlgorithm(AllreduceAlgorithm algorithm);
absl::StatusOr<v1::WireDtype> ParseWireDtype(absl::string_view text);
// "on", "off", or "auto" (UNSPECIFIED: validation picks on for ring async on
// the CPU, off otherwise).
absl::StatusOr<v1::WeightPrediction> ParseWeightPrediction(absl::string_view text);

// Short label of a job's strategy and mode: "ps-sync", "allreduce-async(s=1)",
// "allreduce-async(s=1,wp)" with weight prediction.
std::string StrategyLabel(const v1::JobSpec& spec);

// Why an allreduce job's buckets ran the algorithms they did
// (JobResult.bucket_algorithms): "forced" (the spec names one), "tuned"
// (auto, by the table the submitter sent in JobSpec.tuning_table, as
// `local --autotune` does), or "table" (auto, by the workers' own table:
// their --tuning_file or the built-in one, by world size and bucket bytes).
// Empty for PS jobs and benches.
std::string AlgorithmSource(const v1::JobSpec& spec);

// The host group id of each rank from JobSpec.groups ("0,0,1,1"; spaces
// allowed); empty for an empty text. INVALID_ARGUMENT starting "groups: "
// unless there are exactly `workers` ids, each an integer in
// [0, kMaxWorkers). ValidateJobSpec checks every spec with it.
absl::StatusOr<std::vector<int>> ParseGroups(absl::string_view text, int workers);

// JobSpec.slow_ranks from "RANK:FACTOR[,RANK:FACTOR...]" (the CLI's
// --slow_ranks; "" is none). INVALID_ARGUMENT starting "slow_ranks: " for an
// entry that is not an integer rank >= 0 and a factor from 1 to 100, or a
// rank given twice; ranks past the job's workers are ValidateJobSpec's.
absl::StatusOr<std::vector<v1::RankSlowdown>> ParseSlowRanks(absl::string_view text);
// The same list as that text ("" for none), e.g. for the results file.
std::string SlowRanksText(const v1::JobSpec& spec);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SPEC_JOB_SPEC_H_
