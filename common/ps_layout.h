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
// for none gets PickPsPartitionBytes's size.
inline constexpr size_t kPsPartitionBytes = size_t{4} << 20;
inline constexpr size_t kMinPsPartitionBytes = size_t{64} << 10;
// PickPsPartitionBytes grows a partition past kMinPsPartitionBytes only while
// a shard would hold more than kPickedPartitionsPerShard of them, and to at
// most kPreferredPsPartitionBytes for that reason.
inline constexpr size_t kPreferredPsPartitionBytes = size_t{1} << 20;
inline constexpr int64_t kPickedPartitionsPerShard = 64;
// A shard's --ps_inline_bytes (server/ps/ps_service.h, kPsInlineBytes) is at
// most this: a larger push would hold a gRPC thread for its whole sum.
inline constexpr size_t kMaxPsInlineBytes = size_t{1} << 20;
// INVALID_ARGUMENT naming --ps_inline_bytes when `bytes` exceeds it.
absl::Status CheckPsInlineBytes(uint64_t bytes);
// Pulls one PS shard keeps waiting, at most (all jobs together; a pull of a
// partition not initialised yet waits for rank 0's Init). A job whose
// (workers - 1) * partitions-per-shard exceeds it is refused at submit.
inline constexpr size_t kMaxShardPendingPulls = 1024;

// The partition size of a job that names none, for `bytes` of parameters
// over `shards` shards and `workers` workers (the job's spec, not one
// generation's: every generation of an elastic job must cut alike), and
// whether all its workers share one host (`one_host`). A push
// of partition p is answered once every rank has pushed p, so a step's
// pulls overlap its pushes only with two or more partitions, and the last
// partition's answers trail the pushes by one partition: the more
// partitions, the closer a step comes to the busiest link's bytes. Each
// partition also costs a message per rank and a reduce, which decides where
// the "link" is as fast as the CPU: workers that share one host. So:
//  1. the smallest power of two from kMinPsPartitionBytes (64 KiB) up to
//     kPreferredPsPartitionBytes (1 MiB) that leaves each shard at most
//     kPickedPartitionsPerShard (64) partitions; on one host,
//     kPreferredPsPartitionBytes;
//  2. doubled, up to kPsPartitionBytes, while (workers - 1) x partitions
//     per shard exceeds half of kMaxShardPendingPulls.
// Measured (bench pushpull, 4 workers, one shard on its own host, tbf links
// with a queue of about 1 MB; bench/experiments/ps_partition_sweep.py), as
// multiples of the bound N*K/B: the pick 1.07-1.23 at 100 Mbit/s (0.5-16
// MiB) and 1.09-1.23 at 1 Gbit/s (0.5-64 MiB), 1 MiB partitions 1.36-2.0
// for 0.5-16 MiB at either rate. On loopback (2 cores, 4 workers)
// 64 KiB partitions made 0.5-16 MiB 1.1-1.3x slower than 1 MiB ones, and
// ps-sync training of a 0.94 MB model 1.5x slower.
// The rule does not measure the link: every rank must cut alike before its
// first pull (docs/lab-notes/ps-partitions.md).
size_t PickPsPartitionBytes(uint64_t bytes, int shards, int workers,
                            bool one_host = false);
// `named` when it is > 0 (the job's ps_partition_bytes), else
// PickPsPartitionBytes for the total size of `buckets`.
size_t ResolvePsPartitionBytes(int64_t named, const std::vector<Range>& buckets,
                               int shards, int workers, bool one_host = false);

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
