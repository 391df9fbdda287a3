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

absl::Status CheckPsInlineBytes(uint64_t bytes) {
  if (bytes <= kMaxPsInlineBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--ps_inline_bytes must be at most ", kMaxPsInlineBytes,
                   " (1 MiB: a larger push would hold a gRPC thread for its whole sum), "
                   "got ",
                   bytes));
}

}  // namespace gradsync
