// How a job's flat vector is laid out over parameter-server shards: every
// gradient bucket is cut into byte-balanced partitions of at most
// `max_partition_bytes` (4 MiB by default), and partition p of the whole job
// (numbered in bucket order) lives on shard p % S, as in BytePS. Small
// partitions let a shard reduce one while the next is on the wire, and
// round-robin placement spreads every large bucket over all shards.
//
// Pure functions, no state: every rank computes the same layout from the same
// buckets, and the shards need not know it (each partition is an independent
// slice to them).
#ifndef GRADSYNC_COMMON_PS_LAYOUT_H_
#define GRADSYNC_COMMON_PS_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/partition.h"

namespace gradsync {

// TensorHeader.step of a PULL frame: the job's initial parameters, or the
// async final pull (answered once every rank asked; PsStore::FinalPull).
// Any other step: the current parameters.
inline constexpr int64_t kPullInitialStep = -1;
inline constexpr int64_t kPullFinalStep = -2;

// The largest partition a job may ask for (JobSpec.ps_partition_bytes):
// 4 MiB, as BytePS; the smallest is kMinPsPartitionBytes. A job that asks
// for none gets kPreferredPsPartitionBytes, or the next power of two up to
// kPsPartitionBytes that keeps it within kMaxShardPendingPulls (job_spec.cc):
// on emulated 1 Gbit hosts (4 workers, S = 4 colocated shards, 64 MiB) 1 MiB
// partitions reached 92.7 % of the link bound and 4 MiB ones 83.6 %; on
// loopback the two were within noise of each other.
inline constexpr size_t kPsPartitionBytes = size_t{4} << 20;
inline constexpr size_t kPreferredPsPartitionBytes = size_t{1} << 20;
inline constexpr size_t kMinPsPartitionBytes = size_t{64} << 10;
// A shard's --ps_inline_bytes (server/ps/ps_service.h, kPsInlineBytes) is at
// most this: a larger push would hold a gRPC thread for its whole sum.
inline constexpr size_t kMaxPsInlineBytes = size_t{1} << 20;
// INVALID_ARGUMENT naming --ps_inline_bytes when `bytes` exceeds it.
absl::Status CheckPsInlineBytes(uint64_t bytes);
// Pulls one PS shard keeps waiting, at most (all jobs together; a pull of a
// partition not initialised yet waits for rank 0's Init). A job whose
// (workers - 1) * partitions-per-shard exceeds it is refused at submit.
inline constexpr size_t kMaxShardPendingPulls = 1024;

struct PsPartition {
  int index = 0;   // partition number in the job, 0.. in bucket order
  int bucket = 0;  // bucket it belongs to
  int shard = 0;   // index % num_shards
  Range range;     // elements of the flat vector
};

struct PsLayout {
  std::vector<PsPartition> partitions;
  // partitions_of_bucket[b]: indices into `partitions` of bucket b's
  // partitions, in order (empty for an empty bucket).
  std::vector<std::vector<int>> partitions_of_bucket;
};

// Cuts every bucket [begin, begin + size) into ceil(4 * size /
// max_partition_bytes) partitions whose sizes differ by at most one element
// (PartitionEven) and assigns them round-robin over `num_shards` shards.
// An empty bucket gets no partitions. Requires num_shards >= 1 and
// max_partition_bytes >= 4 (smaller values are treated as 4; 0 means
// kPsPartitionBytes).
PsLayout MakePsLayout(const std::vector<Range>& buckets, int num_shards,
                      size_t max_partition_bytes = kPsPartitionBytes);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_PS_LAYOUT_H_
