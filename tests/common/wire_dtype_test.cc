// The 16-bit wire formats: scalar conversions against independent
// references, the block kernels (vector paths, unaligned input, odd sizes)
// against the scalars, and 16-bit tensor frames.
#include "common/wire_dtype.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/grpc/tensor_frame.h"

namespace gradsync {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Reference rounding: of the two neighbours lo <= x <= hi in the 16-bit
// format (found by decoding every candidate), the nearer, ties to the even
// encoding. `decode` maps an encoding to its value.
template <typename Decode>
uint16_t NearestEven(float x, uint16_t lo_code, Decode decode) {
  const uint16_t hi_code = static_cast<uint16_t>(lo_code + 1);
  const double lo = decode(lo_code), hi = decode(hi_code);
  const double dlo = std::fabs(x - lo), dhi = std::fabs(hi - x);
  if (dlo < dhi) return lo_code;
  if (dhi < dlo) return hi_code;
  return (lo_code & 1) == 0 ? lo_code : hi_code;
}

// Positive finite x: the largest positive 16-bit code whose value <= x.
template <typename Decode>
uint16_t Floor16(float x, uint16_t max_finite, Decode decode) {
  uint16_t lo = 0, hi = max_finite;  // codes of positive values are ordered
  while (lo < hi) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (decode(mid) <= x)
      lo = mid;
    else
      hi = static_cast<uint16_t>(mid - 1);
  }
  return lo;
}

std::vector<float> Samples() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          65504.0f,
                          65519.0f,
                          65520.0f,
                          65536.0f,
                          1e-8f,
                          5.96e-8f,
                          2.98e-8f,
                          6.1e-5f,
                          3.0e38f,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 0x7F7FFFFFu);
  for (int i = 0; i < 200000; ++i) v.push_back(FromBits(bits(rng)));
  // Exact ties of both formats: x = value + half a step.
  for (uint32_t u = 0x3F800000u; u < 0x3F800000u + 64 * 0x10000u; u += 0x8000u) {
    v.push_back(FromBits(u));
  }
  for (uint32_t u = 0x38800000u; u < 0x47800000u; u += 0x1000u * 97) {
    v.push_back(FromBits(u));
  }
  return v;
}

// Decoders for the reference, where the code after the largest finite one
// stands for the next power of two (what rounding up to inf passes).
double RefBf16(uint16_t c) { return c == 0x7F80 ? std::ldexp(1.0, 128) : Bf16ToFloat(c); }
double RefFp16(uint16_t c) { return c == 0x7C00 ? 65536.0 : Fp16ToFloat(c); }

TEST(WireDtype, Bf16RoundsToNearestEven) {
  for (float x : Samples()) {
    const float a = std::fabs(x);
    const uint16_t want = NearestEven(a, Floor16(a, 0x7F7F, RefBf16), RefBf16);
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    ASSERT_EQ(FloatToBf16(x), want | sign) << "x = " << x;
  }
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f)), 1.0f);
  EXPECT_TRUE(std::isinf(Bf16ToFloat(FloatToBf16(INFINITY))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
  // A NaN whose payload sits in the dropped bits stays a NaN.
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(FromBits(0x7F800001u)))));
}

TEST(WireDtype, Fp16RoundsToNearestEvenAndOverflowsToInf) {
  for (float x : Samples()) {
    const float a = std::fabs(x);
    uint16_t want;
    if (a >= 65536.0f) {
      want = 0x7C00;
    } else {
      want = NearestEven(a, Floor16(a, 0x7BFF, RefFp16), RefFp16);
    }
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    ASSERT_EQ(FloatToFp16(x), want | sign) << "x = " << x;
  }
  EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(NAN))));
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(-INFINITY)), -INFINITY);
}

TEST(WireDtype, EveryFp16AndBf16CodeDecodesAndReencodesToItself) {
  for (uint32_t c = 0; c <= 0xFFFF; ++c) {
    const uint16_t h = static_cast<uint16_t>(c);
    if ((h & 0x7C00) != 0x7C00 || (h & 0x3FF) == 0) {  // not NaN
      ASSERT_EQ(FloatToFp16(Fp16ToFloat(h)), h) << std::hex << c;
    }
    if ((h & 0x7F80) != 0x7F80 || (h & 0x7F) == 0) {
      ASSERT_EQ(FloatToBf16(Bf16ToFloat(h)), h) << std::hex << c;
    }
  }
}

// The block kernels (F16C where the CPU has it, vectorized loops otherwise)
// give the scalar functions' bits, for odd sizes and unaligned bytes.
TEST(WireDtype, BlockKernelsMatchTheScalarConversions) {
  const std::vector<float> samples = Samples();
  for (WireDtype d : {WireDtype::kFp32, WireDtype::kBf16, WireDtype::kFp16}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, size_t{1024},
                     size_t{1025}, size_t{4099}}) {
      SCOPED_TRACE(std::string(WireDtypeName(d)) + " n " + std::to_string(n));
      std::vector<float> x(samples.begin(), samples.begin() + n);
      std::vector<char> bytes(n * WireBytes(d) + 1);
      char* unaligned = bytes.data() + 1;
      EncodeWire(d, x.data(), unaligned, n);
      std::vector<float> back(n), rounded = x, sum(n), sum2(n);
      DecodeWire(d, unaligned, back.data(), n);
      RoundToWire(d, rounded.data(), n);
      std::vector<float> acc(n, 1.5f);
      DecodeAddWire(d, acc.data(), unaligned, n);
      DecodeSumWire(d, sum.data(), sum2.data(), x.data(), unaligned, n);
      for (size_t i = 0; i < n; ++i) {
        float want = x[i];
        if (d == WireDtype::kBf16) want = Bf16ToFloat(FloatToBf16(x[i]));
        if (d == WireDtype::kFp16) want = Fp16ToFloat(FloatToFp16(x[i]));
        uint16_t code;
        std::memcpy(&code, unaligned + i * 2, 2);
        if (d == WireDtype::kBf16) {
          ASSERT_EQ(code, FloatToBf16(x[i])) << i;
        } else if (d == WireDtype::kFp16) {
          ASSERT_EQ(code, FloatToFp16(x[i])) << i;
        }
        ASSERT_EQ(Bits(back[i]), Bits(want)) << i;
        ASSERT_EQ(Bits(rounded[i]), Bits(want)) << i;
        ASSERT_EQ(Bits(acc[i]), Bits(1.5f + want)) << i;
        ASSERT_EQ(Bits(sum[i]), Bits(x[i] + want)) << i;
        ASSERT_EQ(Bits(sum2[i]), Bits(sum[i])) << i;
      }
      // Rounding twice changes nothing.
      std::vector<float> again = rounded;
      RoundToWire(d, again.data(), n);
      EXPECT_EQ(again, rounded);
    }
  }
}

// A 16-bit frame cut at every odd byte boundary decodes to the same values
// (elements straddling slices are assembled), and Reframe keeps its dtype.
TEST(WireDtype, SixteenBitFramesSurviveOddSlicesAndReframe) {
  const size_t n = 1001;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = 0.37f * i - 100.0f;
  for (WireDtype d : {WireDtype::kBf16, WireDtype::kFp16}) {
    TensorHeader h;
    h.set_job_id("j");
    grpc::ByteBuffer buf = EncodeFrameAs(h, d, x.data(), n);
    std::vector<float> want = x;
    RoundToWire(d, want.data(), n);
    for (size_t piece : {size_t{1}, size_t{3}, size_t{5}, size_t{4096}}) {
      grpc::Slice single;
      ASSERT_TRUE(buf.DumpToSingleSlice(&single).ok());
      std::vector<grpc::Slice> slices;
      for (size_t b = 0; b < single.size(); b += piece) {
        slices.emplace_back(single.begin() + b, std::min(piece, single.size() - b));
      }
      auto f = DecodedFrame::Parse(grpc::ByteBuffer(slices.data(), slices.size()));
      ASSERT_TRUE(f.ok()) << f.status();
      EXPECT_EQ(f->dtype(), d);
      ASSERT_EQ(f->count(), n);
      std::vector<float> got(n), sum(n, 0.0f);
      f->CopyTo(got.data());
      EXPECT_EQ(got, want);
      f->AddTo(sum.data());
      EXPECT_EQ(sum, want);
      auto again = DecodedFrame::Parse(f->Reframe(h));
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_EQ(again->dtype(), d);
      std::vector<float> got2(n);
      again->CopyTo(got2.data());
      EXPECT_EQ(got2, want);
    }
  }
}

TEST(WireDtype, FramesWithUnknownDtypeOrWrongLengthAreRefused) {
  std::vector<float> x(10, 1.0f);
  TensorHeader h;
  // A 16-bit frame whose header claims float32 elements: 20 bytes for 10.
  grpc::ByteBuffer half = EncodeFrameAs(h, WireDtype::kBf16, x.data(), 10);
  grpc::Slice single;
  ASSERT_TRUE(half.DumpToSingleSlice(&single).ok());
  v1::TensorFrame frame;
  ASSERT_TRUE(frame.ParseFromArray(single.begin(), static_cast<int>(single.size())));
  EXPECT_EQ(frame.data().size(), 20u);
  frame.mutable_header()->set_dtype(v1::WIRE_DTYPE_FP32);
  std::string wrong = frame.SerializeAsString();
  grpc::Slice ws(wrong);
  EXPECT_TRUE(
      absl::IsInvalidArgument(DecodedFrame::Parse(grpc::ByteBuffer(&ws, 1)).status()));
  frame.mutable_header()->set_dtype(static_cast<v1::WireDtype>(77));
  std::string unknown = frame.SerializeAsString();
  grpc::Slice us(unknown);
  EXPECT_TRUE(
      absl::IsInvalidArgument(DecodedFrame::Parse(grpc::ByteBuffer(&us, 1)).status()));
}

}  // namespace
}  // namespace gradsync
