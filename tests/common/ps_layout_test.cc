#include "common/ps_layout.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace gradsync {
namespace {

constexpr size_t kMaxElems = kPsPartitionBytes / sizeof(float);

// Checks the layout's contract for `buckets` over `shards`.
void CheckLayout(const std::vector<Range>& buckets, int shards, size_t max_bytes) {
  const PsLayout l = MakePsLayout(buckets, shards, max_bytes);
  const size_t max_elems = max_bytes / sizeof(float);
  ASSERT_EQ(l.partitions_of_bucket.size(), buckets.size());
  size_t total = 0;
  for (const Range& b : buckets) total = std::max(total, b.end());
  std::vector<int> covered(total, 0);
  int next_index = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    SCOPED_TRACE(testing::Message() << "bucket " << b << " size " << buckets[b].size
                                    << " shards " << shards);
    const std::vector<int>& ids = l.partitions_of_bucket[b];
    const size_t want = (buckets[b].size + max_elems - 1) / max_elems;
    ASSERT_EQ(ids.size(), want);
    size_t lo = SIZE_MAX, hi = 0, at = buckets[b].begin;
    for (int id : ids) {
      const PsPartition& p = l.partitions[id];
      EXPECT_EQ(p.index, next_index++);  // numbered over the job, in order
      EXPECT_EQ(p.bucket, static_cast<int>(b));
      EXPECT_EQ(p.shard, p.index % shards);
      EXPECT_EQ(p.range.begin, at);  // contiguous within the bucket
      at = p.range.end();
      EXPECT_GE(p.range.size, 1u);
      EXPECT_LE(p.range.size * sizeof(float), max_bytes);
      lo = std::min(lo, p.range.size);
      hi = std::max(hi, p.range.size);
      for (size_t i = p.range.begin; i < p.range.end(); ++i) ++covered[i];
    }
    EXPECT_EQ(at, buckets[b].end());
    if (!ids.empty()) {
      EXPECT_LE(hi - lo, 1u) << "not byte-balanced";
    }
  }
  EXPECT_EQ(next_index, static_cast<int>(l.partitions.size()));
  for (const Range& b : buckets) {
    for (size_t i = b.begin; i < b.end(); ++i) {
      ASSERT_EQ(covered[i], 1) << "element " << i;
    }
  }
}

TEST(PsLayoutTest, OneBucketOfManySizesOverOneToFiveShards) {
  const std::vector<size_t> sizes = {1,
                                     2,
                                     7,
                                     1001,
                                     kMaxElems - 1,
                                     kMaxElems,
                                     kMaxElems + 1,
                                     2 * kMaxElems,
                                     2 * kMaxElems + 3,
                                     5 * kMaxElems + 7};
  for (size_t n : sizes) {
    for (int shards = 1; shards <= 5; ++shards) {
      CheckLayout({Range{0, n}}, shards, kPsPartitionBytes);
    }
  }
}

TEST(PsLayoutTest, ExactlyFourMegabytesIsOnePartitionFourMoreBytesAreTwo) {
  const PsLayout exact = MakePsLayout({Range{0, kMaxElems}}, 2);
  ASSERT_EQ(exact.partitions.size(), 1u);
  EXPECT_EQ(exact.partitions[0].range.size * sizeof(float), kPsPartitionBytes);
  const PsLayout over = MakePsLayout({Range{0, kMaxElems + 1}}, 2);
  ASSERT_EQ(over.partitions.size(), 2u);
  // Balanced, not 4 MB + one element: (kMaxElems + 1) / 2 each, +-1.
  EXPECT_EQ(over.partitions[0].range.size, kMaxElems / 2 + 1);
  EXPECT_EQ(over.partitions[1].range.size, kMaxElems / 2);
  EXPECT_EQ(over.partitions[0].shard, 0);
  EXPECT_EQ(over.partitions[1].shard, 1);
}

TEST(PsLayoutTest, ManyBucketsRoundRobinOverTheWholeJob) {
  // Buckets as the trainer makes them: contiguous, last layers first in sync
  // order but any order of offsets is allowed; odd sizes and an empty one.
  const std::vector<Range> buckets = {Range{3 * kMaxElems + 10, 1290},
                                      Range{kMaxElems + 7, 2 * kMaxElems + 3},
                                      Range{kMaxElems + 7, 0}, Range{0, kMaxElems + 7}};
  for (int shards = 1; shards <= 5; ++shards) {
    CheckLayout(buckets, shards, kPsPartitionBytes);
  }
  const PsLayout l = MakePsLayout(buckets, 3);
  // 1 + 3 + 0 + 2 partitions; bucket 1's first partition is the job's 2nd.
  ASSERT_EQ(l.partitions.size(), 6u);
  EXPECT_EQ(l.partitions_of_bucket[1], (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(l.partitions_of_bucket[2].empty());
  EXPECT_EQ(l.partitions[4].shard, 1);
}

TEST(PsLayoutTest, SmallPartitionBoundForTests) {
  for (size_t max_bytes : {size_t{4}, size_t{12}, size_t{64 << 10}}) {
    for (int shards = 1; shards <= 5; ++shards) {
      CheckLayout({Range{0, 1}, Range{1, 7}, Range{8, 1000}, Range{1008, 16385}}, shards,
                  max_bytes);
    }
  }
  // 0 means the default bound.
  EXPECT_EQ(MakePsLayout({Range{0, kMaxElems + 1}}, 1, 0).partitions.size(), 2u);
}

TEST(PsLayoutTest, PickedPartitionsAreSmallUntilAShardHoldsSixtyFourOfThem) {
  constexpr uint64_t KiB = 1024, MiB = 1024 * 1024;
  struct Case {
    uint64_t bytes;
    int shards;
    int workers;
    size_t want;
  };
  const std::vector<Case> cases = {
      {0, 1, 4, 64 * KiB},
      {4, 1, 4, 64 * KiB},
      {512 * KiB, 1, 4, 64 * KiB},     // 8 partitions
      {4 * MiB, 1, 4, 64 * KiB},       // 64: still at most 64 per shard
      {4 * MiB + 4, 1, 4, 128 * KiB},  // 65 would be one too many
      {16 * MiB, 1, 4, 256 * KiB},
      {16 * MiB, 4, 4, 64 * KiB},  // 64 per shard over 4 shards
      {64 * MiB, 1, 4, 1 * MiB},
      {256 * MiB, 1, 2, 1 * MiB},  // 256 per shard: 1 MiB is the cap of step 1
      // Step 2: (workers - 1) x per shard within 512 pending pulls.
      {256 * MiB, 1, 3, 1 * MiB},   // 2 x 256 = 512 fits
      {256 * MiB, 1, 4, 2 * MiB},   // 3 x 256 > 512; 3 x 128 fits
      {256 * MiB, 1, 6, 4 * MiB},   // 5 x 128 > 512; 5 x 64 fits
      {256 * MiB, 1, 20, 4 * MiB},  // the largest, even where it does not fit
  };
  for (const Case& c : cases) {
    EXPECT_EQ(PickPsPartitionBytes(c.bytes, c.shards, c.workers), c.want)
        << c.bytes << " bytes, " << c.shards << " shards, " << c.workers << " workers";
  }
  // Degenerate counts are taken as 1.
  EXPECT_EQ(PickPsPartitionBytes(16 * MiB, 0, 0), 256 * KiB);
}

TEST(PsLayoutTest, ResolveKeepsANamedSizeAndPicksForTheBucketsTotal) {
  const std::vector<Range> buckets = {Range{0, 3 << 20},
                                      Range{3 << 20, 1 << 20}};  // 16 MiB
  EXPECT_EQ(ResolvePsPartitionBytes(128 << 10, buckets, 1, 4), size_t{128} << 10);
  EXPECT_EQ(ResolvePsPartitionBytes(0, buckets, 1, 4),
            PickPsPartitionBytes(16 << 20, 1, 4));
  EXPECT_EQ(ResolvePsPartitionBytes(0, buckets, 1, 4), size_t{256} << 10);
  EXPECT_EQ(ResolvePsPartitionBytes(0, {}, 2, 4), size_t{64} << 10);
}

}  // namespace
}  // namespace gradsync
