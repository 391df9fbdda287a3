#include "common/ps_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gradsync {

PsLayout MakePsLayout(const std::vector<Range>& buckets, int num_shards,
                      size_t max_partition_bytes) {
  if (max_partition_bytes == 0) max_partition_bytes = kPsPartitionBytes;
  const size_t max_elems = std::max<size_t>(1, max_partition_bytes / sizeof(float));
  const int shards = std::max(1, num_shards);
  PsLayout layout;
  layout.partitions_of_bucket.resize(buckets.size());
  for (size_t b = 0; b < buckets.size(); ++b) {
    const Range bucket = buckets[b];
    if (bucket.size == 0) continue;
    const size_t parts = (bucket.size + max_elems - 1) / max_elems;
    for (const Range& r : PartitionEven(bucket.size, static_cast<int>(parts))) {
      PsPartition p;
      p.index = static_cast<int>(layout.partitions.size());
      p.bucket = static_cast<int>(b);
      p.shard = p.index % shards;
      p.range = Range{bucket.begin + r.begin, r.size};
      layout.partitions_of_bucket[b].push_back(p.index);
      layout.partitions.push_back(p);
    }
  }
  return layout;
}

size_t PickPsPartitionBytes(uint64_t bytes, int shards, int workers, bool one_host) {
  const uint64_t s = static_cast<uint64_t>(std::max(1, shards));
  const uint64_t waiting = static_cast<uint64_t>(std::max(1, workers) - 1);
  auto per_shard = [&](size_t partition) {
    const uint64_t partitions = (bytes + partition - 1) / partition;
    return (partitions + s - 1) / s;
  };
  size_t partition = one_host ? kPreferredPsPartitionBytes : kMinPsPartitionBytes;
  while (partition < kPreferredPsPartitionBytes &&
         per_shard(partition) > static_cast<uint64_t>(kPickedPartitionsPerShard)) {
    partition *= 2;
  }
  while (partition < kPsPartitionBytes &&
         per_shard(partition) * waiting > kMaxShardPendingPulls / 2) {
    partition *= 2;
  }
  return partition;
}

size_t ResolvePsPartitionBytes(int64_t named, const std::vector<Range>& buckets,
                               int shards, int workers, bool one_host) {
  if (named > 0) return static_cast<size_t>(named);
  uint64_t bytes = 0;
  for (const Range& b : buckets) bytes += uint64_t{b.size} * sizeof(float);
  return PickPsPartitionBytes(bytes, shards, workers, one_host);
}

absl::Status CheckPsInlineBytes(uint64_t bytes) {
  if (bytes <= kMaxPsInlineBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--ps_inline_bytes must be at most ", kMaxPsInlineBytes,
                   " (1 MiB: a larger push would hold a gRPC thread for its whole sum), "
                   "got ",
                   bytes));
}

}  // namespace gradsync
