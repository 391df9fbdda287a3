// The job's defaults and caps, defined once and free of wire types, so that
// code below the worker's job entry and the tuning table can read them.
#ifndef GRADSYNC_COMMON_SPEC_JOB_LIMITS_H_
#define GRADSYNC_COMMON_SPEC_JOB_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "common/message_limits.h"

namespace gradsync {

// Defaults, defined once. ValidateJobSpec fills them into every spec, so code
// after validation reads the spec and never repeats these numbers.
inline constexpr int64_t kDefaultBucketBytes = 25 << 20;
inline constexpr int64_t kDefaultChunkBytes = 1 << 20;
// Collectives of at least this many bytes use the bulk connections (no BDP
// probing): measured on 2 cores, ring and hd at 4 ranks gain 10-20 % from
// 8 MiB up, break even around 2-4 MiB and lose below (docs/lab-notes/bdp-probing.md).
inline constexpr int64_t kDefaultPeerBulkBytes = 4 << 20;
inline constexpr int32_t kDefaultStepTimeoutMs = 30000;
inline constexpr int32_t kDefaultAllreduceAsyncStaleness = 1;
// Ring async keeps staleness + 2 copies of the gradient; more than this many
// steps in flight is a mistake, not an experiment.
inline constexpr int32_t kMaxAllreduceAsyncStaleness = 64;
inline constexpr float kDefaultSgdLr = 0.05f;
inline constexpr float kDefaultAdamLr = 0.001f;

// Caps: a spec beyond them is refused (INVALID_ARGUMENT naming the field)
// before anything is allocated for it.
inline constexpr size_t kMaxNameBytes = 256;
inline constexpr size_t kMaxPathBytes = 4096;
inline constexpr size_t kMaxModelBytes = 256;
inline constexpr size_t kMaxTuningTableBytes = 64 << 10;
inline constexpr int32_t kMaxWorkers = 1024;
inline constexpr int32_t kMaxBatchSize = 1 << 16;
inline constexpr int32_t kMaxPsShards = 256;
inline constexpr uint64_t kMaxParams = uint64_t{1} << 30;  // 4 GiB of float32
inline constexpr int32_t kMaxEpochs = 100000;
inline constexpr int64_t kMaxSteps = int64_t{1} << 40;
inline constexpr int64_t kMaxBucketBytes = int64_t{1} << 32;
// One ring segment travels in one frame: the cap is the frame's data limit.
inline constexpr int64_t kMaxChunkBytes = kMaxFrameDataBytes;
inline constexpr int32_t kMaxStepTimeoutMs = 3600 * 1000;
inline constexpr int32_t kMaxSspStaleness = 1 << 20;
inline constexpr int32_t kMaxConnectionsPerPeer = 8;
// Elastic jobs (JobSpec.elastic): the commit interval when checkpoint_every
// is 0 (at most this many steps are redone after a re-formation), and the
// default and largest wait for min_workers.
inline constexpr int64_t kDefaultElasticCheckpointEvery = 50;
inline constexpr int32_t kDefaultElasticWaitMs = 60 * 1000;
inline constexpr int32_t kMaxElasticWaitMs = 3600 * 1000;
// Bench jobs (kind = bench): sizes per job, bytes per size, timed and warm-up
// iterations per size.
inline constexpr int kMaxBenchSizes = 64;
inline constexpr int64_t kMaxBenchBytes = int64_t{1} << 30;
inline constexpr int32_t kMaxBenchIters = 10000;
inline constexpr int32_t kMaxBenchWarmup = 10000;

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SPEC_JOB_LIMITS_H_
