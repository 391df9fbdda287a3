#include "common/kernels.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gradsync {
namespace {

std::vector<float> RandomVec(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

class KernelsTest : public ::testing::TestWithParam<size_t> {};

TEST_P(KernelsTest, AddIntoMatchesNaive) {
  const size_t n = GetParam();
  std::vector<float> dst = RandomVec(n, 1), src = RandomVec(n, 2);
  std::vector<float> want = dst;
  for (size_t i = 0; i < n; ++i) want[i] = dst[i] + src[i];
  AddInto(dst.data(), src.data(), n);
  ASSERT_EQ(0, std::memcmp(want.data(), dst.data(), n * sizeof(float)));
}

TEST_P(KernelsTest, AddIntoUnalignedMatchesNaive) {
  const size_t n = GetParam();
  const std::vector<float> src = RandomVec(n, 3);
  for (size_t offset = 1; offset <= 3; ++offset) {
    std::vector<char> bytes(n * sizeof(float) + 8);
    char* p = bytes.data() + offset;
    std::memcpy(p, src.data(), n * sizeof(float));
    std::vector<float> dst = RandomVec(n, 4);
    std::vector<float> want = dst;
    for (size_t i = 0; i < n; ++i) want[i] = dst[i] + src[i];
    AddIntoUnaligned(dst.data(), p, n);
    ASSERT_EQ(0, std::memcmp(want.data(), dst.data(), n * sizeof(float)))
        << "offset " << offset;
  }
}

TEST_P(KernelsTest, SumIntoUnalignedWritesOneOrTwoOutputs) {
  const size_t n = GetParam();
  const std::vector<float> b = RandomVec(n, 7);
  const std::vector<float> a = RandomVec(n, 8);
  std::vector<float> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
  for (size_t offset = 0; offset <= 3; ++offset) {
    std::vector<char> bytes(n * sizeof(float) + 8);
    char* p = bytes.data() + offset;
    std::memcpy(p, b.data(), n * sizeof(float));
    std::vector<float> out(n, -1.0f);
    SumIntoUnaligned(out.data(), nullptr, a.data(), p, n);
    ASSERT_EQ(0, std::memcmp(want.data(), out.data(), n * sizeof(float)));
    // Second output aliasing the input, as the ring's last reduce step does.
    std::vector<float> inout = a;
    std::fill(out.begin(), out.end(), -1.0f);
    SumIntoUnaligned(out.data(), inout.data(), inout.data(), p, n);
    ASSERT_EQ(0, std::memcmp(want.data(), out.data(), n * sizeof(float)));
    ASSERT_EQ(0, std::memcmp(want.data(), inout.data(), n * sizeof(float)))
        << "offset " << offset;
  }
}

TEST_P(KernelsTest, ScaleMatchesNaive) {
  const size_t n = GetParam();
  std::vector<float> x = RandomVec(n, 5);
  std::vector<float> want = x;
  for (float& v : want) v *= 0.37f;
  Scale(x.data(), 0.37f, n);
  ASSERT_EQ(0, std::memcmp(want.data(), x.data(), n * sizeof(float)));
}

TEST_P(KernelsTest, PredictAheadMatchesNaive) {
  const size_t n = GetParam();
  std::vector<float> w = RandomVec(n, 7), prev = RandomVec(n, 8);
  std::vector<float> want_w = w, want_prev = w;
  for (size_t i = 0; i < n; ++i) want_w[i] = w[i] + 2.0f * (w[i] - prev[i]);
  PredictAhead(w.data(), prev.data(), 2.0f, n);
  ASSERT_EQ(0, std::memcmp(want_w.data(), w.data(), n * sizeof(float)));
  ASSERT_EQ(0, std::memcmp(want_prev.data(), prev.data(), n * sizeof(float)));
}

TEST_P(KernelsTest, ChecksumDetectsOneBitFlip) {
  const size_t n = GetParam();
  std::vector<float> a = RandomVec(n, 6);
  std::vector<float> b = a;
  EXPECT_EQ(Checksum(a.data(), n), Checksum(b.data(), n));
  EXPECT_EQ(ChecksumHex(a.data(), n), ChecksumHex(b.data(), n));
  for (size_t idx : {size_t{0}, n / 2, n - 1}) {
    for (int bit : {0, 17, 31}) {
      std::vector<float> c = a;
      uint32_t u;
      std::memcpy(&u, &c[idx], 4);
      u ^= 1u << bit;
      std::memcpy(&c[idx], &u, 4);
      EXPECT_NE(Checksum(a.data(), n), Checksum(c.data(), n))
          << "idx " << idx << " bit " << bit;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, KernelsTest,
                         ::testing::Values(size_t{1}, size_t{7}, size_t{1000},
                                           (size_t{1} << 20) + 3));

TEST(ChecksumTest, KnownFnv1aValues) {
  // FNV-1a 64 of zero bytes is the offset basis.
  EXPECT_EQ(Checksum(nullptr, 0), 14695981039346656037ULL);
  EXPECT_EQ(ChecksumHex(nullptr, 0), "cbf29ce484222325");
  // Reference loop over the bytes of 1.0f.
  const float one = 1.0f;
  unsigned char bytes[4];
  std::memcpy(bytes, &one, 4);
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  EXPECT_EQ(Checksum(&one, 1), h);
  const std::string hex = ChecksumHex(&one, 1);
  EXPECT_EQ(hex.size(), 16u);
  EXPECT_EQ(std::stoull(hex, nullptr, 16), h);
}

}  // namespace
}  // namespace gradsync
