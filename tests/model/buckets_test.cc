// MakeBuckets: the bucket layout rule (worker/model/device_model.h).
#include <gtest/gtest.h>

#include "worker/model/device_model.h"

namespace gradsync {
namespace {

std::vector<Range> BucketsOf(const std::vector<int>& widths, int64_t bucket_bytes) {
  auto model = MakeCpuModel(MlpSpec{widths});
  EXPECT_TRUE(model.ok()) << model.status();
  return MakeBuckets(**model, bucket_bytes);
}

// Buckets cover [0, n) contiguously from the top down, layer-aligned.
void ExpectTiling(const std::vector<int>& widths, const std::vector<Range>& b) {
  Mlp mlp(MlpSpec{widths});
  size_t end = mlp.num_params();
  for (const Range& r : b) {
    EXPECT_EQ(r.begin + r.size, end);
    bool aligned = false;
    for (int l = 0; l < mlp.num_layers(); ++l) {
      aligned |= mlp.LayerRange(l).begin == r.begin;
    }
    EXPECT_TRUE(aligned) << "bucket at " << r.begin;
    end = r.begin;
  }
  EXPECT_EQ(end, 0u);
}

TEST(MakeBuckets, DefaultModelGetsASmallFirstBucket) {
  const std::vector<int> w = {784, 256, 128, 10};
  const std::vector<Range> b = BucketsOf(w, 25 << 20);
  ASSERT_EQ(b.size(), 2u);  // [layers 2+1], [layer 0]
  EXPECT_EQ(b[0].size, size_t{128 * 10 + 10 + 256 * 128 + 128});
  EXPECT_EQ(b[1].size, size_t{784 * 256 + 256});
  ExpectTiling(w, b);
}

TEST(MakeBuckets, FirstBucketIsAtMostOneMebibyte) {
  // 4096-wide layers: 64 MiB each; the last layer alone exceeds 1 MiB and
  // gets bucket 0 on its own, the next ones group up to bucket_bytes.
  const std::vector<int> w = {784, 4096, 4096, 4096, 10};
  const std::vector<Range> b = BucketsOf(w, 25 << 20);
  ASSERT_GE(b.size(), 3u);
  EXPECT_EQ(b[0].size, size_t{4096 * 10 + 10});  // 160 KB < 1 MiB
  ExpectTiling(w, b);
  for (size_t i = 1; i < b.size(); ++i) {
    // Each later bucket is one layer here: two 4096x4096 layers exceed 25 MB.
    EXPECT_LE(b[i].size * 4, size_t{4096 * 4096 + 4096} * 4);
  }
}

TEST(MakeBuckets, LaterBucketsFillUpToBucketBytes) {
  const std::vector<int> w = {10, 10, 10, 10, 10, 10};  // 5 layers of 110
  // total 550 floats; first bucket <= 550/4 = 137 floats: one layer; then
  // 1000-byte buckets (250 floats) take two layers each.
  const std::vector<Range> b = BucketsOf(w, 1000);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].size, 110u);
  EXPECT_EQ(b[1].size, 220u);
  EXPECT_EQ(b[2].size, 220u);
  ExpectTiling(w, b);
}

TEST(MakeBuckets, OneLayerModelIsOneBucket) {
  const std::vector<Range> b = BucketsOf({3, 2}, 25 << 20);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].size, 8u);
}

}  // namespace
}  // namespace gradsync
