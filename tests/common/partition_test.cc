#include "common/partition.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace gradsync {
namespace {

TEST(PartitionEvenTest, ContiguousCoveringAndBalanced) {
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, (size_t{1} << 20) + 3}) {
    for (int parts : {1, 2, 3, 4, 5, 8}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " parts=" << parts);
      const std::vector<Range> r = PartitionEven(n, parts);
      ASSERT_EQ(r.size(), static_cast<size_t>(parts));
      size_t next = 0;
      size_t lo = r[0].size, hi = r[0].size;
      for (size_t i = 0; i < r.size(); ++i) {
        EXPECT_EQ(r[i].begin, next) << "part " << i;
        next = r[i].end();
        lo = std::min(lo, r[i].size);
        hi = std::max(hi, r[i].size);
        // The first n % parts ranges carry the extra element.
        EXPECT_EQ(r[i].size, n / parts + (i < n % parts ? 1 : 0));
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(hi - lo, 1u);
    }
  }
}

TEST(SegmentsTest, CutsIntoBoundedPieces) {
  const std::vector<Range> s = Segments(Range{10, 25}, 10);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].begin, 10u);
  EXPECT_EQ(s[0].size, 10u);
  EXPECT_EQ(s[1].begin, 20u);
  EXPECT_EQ(s[1].size, 10u);
  EXPECT_EQ(s[2].begin, 30u);
  EXPECT_EQ(s[2].size, 5u);
}

TEST(SegmentsTest, ExactMultipleAndSmallRange) {
  EXPECT_EQ(Segments(Range{0, 20}, 10).size(), 2u);
  const std::vector<Range> one = Segments(Range{5, 3}, 100);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].begin, 5u);
  EXPECT_EQ(one[0].size, 3u);
}

TEST(SegmentsTest, EmptyRangeGivesNothing) {
  EXPECT_TRUE(Segments(Range{7, 0}, 4).empty());
}

TEST(SegmentsTest, CoversRangeContiguously) {
  for (size_t size : {size_t{1}, size_t{7}, size_t{1000}, size_t{12345}}) {
    for (size_t max : {size_t{1}, size_t{3}, size_t{64}, size_t{5000}}) {
      const Range r{17, size};
      const std::vector<Range> s = Segments(r, max);
      size_t next = r.begin;
      for (const Range& p : s) {
        EXPECT_EQ(p.begin, next);
        EXPECT_GE(p.size, 1u);
        EXPECT_LE(p.size, max);
        next = p.end();
      }
      EXPECT_EQ(next, r.end());
      EXPECT_EQ(s.size(), (size + max - 1) / max);
    }
  }
}

}  // namespace
}  // namespace gradsync
