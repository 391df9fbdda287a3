// The largest gRPC message any gradsync daemon or client sends or accepts,
// derived from the largest legal message of each plane. gRPC 1.51 has no
// per-method limit and one server carries both planes, so one limit covers
// both: common/grpc (DefaultChannelArgs, ConfigureServerBuilder) sets it as
// the max receive AND send size of every channel and server. A larger
// message is refused with RESOURCE_EXHAUSTED before it is buffered whole.
//
// Data plane: a TensorFrame carries one ring segment (JobSpec.chunk_bytes,
// capped at kMaxFrameDataBytes via kMaxChunkBytes) or one PS partition (at
// most kPsPartitionBytes), plus a header (job id, ints, an INIT ShardConfig).
// Control plane: the largest is a traced job's result (JobDone with one
// rank's trace, GetJob with every rank's, both capped in events, see
// server/coordinator/job_table.h); ListJobs carries no traces and at most
// the retained jobs (docs/operations.md "Limits").
#ifndef GRADSYNC_COMMON_MESSAGE_LIMITS_H_
#define GRADSYNC_COMMON_MESSAGE_LIMITS_H_

#include <algorithm>
#include <climits>
#include <cstdint>

#include "common/ps_layout.h"

namespace gradsync {

// Tensor data in one frame: the cap of chunk_bytes and of PS partitions.
inline constexpr int64_t kMaxFrameDataBytes = int64_t{32} << 20;
// Everything in a frame but the data (measured: < 1 KiB; generous slack).
inline constexpr int64_t kMaxFrameHeaderBytes = int64_t{64} << 10;
// Control messages (job results with traces, job lists).
inline constexpr int64_t kMaxControlMessageBytes = int64_t{48} << 20;

inline constexpr int64_t kMaxMessageBytes =
    std::max(kMaxFrameDataBytes + kMaxFrameHeaderBytes, kMaxControlMessageBytes);

static_assert(static_cast<int64_t>(kPsPartitionBytes) <= kMaxFrameDataBytes,
              "a PS partition must fit in one frame");
static_assert(kMaxMessageBytes <= INT_MAX, "gRPC takes the limit as an int");

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_MESSAGE_LIMITS_H_
