#include "common/wire_dtype.h"

#include <cstring>

#include "common/kernels.h"
#include "common/vector_clones.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace gradsync {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline uint16_t ToBf16(float f) {
  const uint32_t u = Bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN stays quiet NaN
  }
  // Round to nearest, ties to even: add just under half an ulp, plus one
  // when the kept part is odd. A carry into the exponent is the right result
  // (up to inf).
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

inline float FromBf16(uint16_t h) { return FromBits(static_cast<uint32_t>(h) << 16); }

// Conversions run over blocks of this many elements through aligned stack
// buffers: the loops vectorize and unaligned input needs no special case.
constexpr size_t kBlock = 1024;

#if defined(__x86_64__)
// fp16 with the F16C instructions (every x86-64 CPU since about 2012); the
// portable loops below give the same bits (tested) where they are missing.
__attribute__((target("avx,f16c"))) void EncodeFp16F16c(const float* src, uint16_t* dst,
                                                        size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) dst[i] = FloatToFp16(src[i]);
}

__attribute__((target("avx,f16c"))) void DecodeFp16F16c(const uint16_t* src, float* dst,
                                                        size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = Fp16ToFloat(src[i]);
}

// F16C from CPUID leaf 1 (clang 14's __builtin_cpu_supports does not know
// "f16c"); "avx" also checks that the OS saves the AVX registers.
bool HaveF16c() {
  static const bool have = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
    return (c & bit_F16C) != 0 && __builtin_cpu_supports("avx");
  }();
  return have;
}
#endif

GRADSYNC_VECTOR_CLONES
void EncodeBf16Block(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = ToBf16(src[i]);
}

GRADSYNC_VECTOR_CLONES
void DecodeBf16Block(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FromBf16(src[i]);
}

// dst[0..n) = 16-bit encodings of src (aligned, n <= kBlock).
void Encode16(WireDtype d, const float* src, uint16_t* dst, size_t n) {
  if (d == WireDtype::kBf16) return EncodeBf16Block(src, dst, n);
#if defined(__x86_64__)
  if (HaveF16c()) return EncodeFp16F16c(src, dst, n);
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToFp16(src[i]);
}

void Decode16(WireDtype d, const uint16_t* src, float* dst, size_t n) {
  if (d == WireDtype::kBf16) return DecodeBf16Block(src, dst, n);
#if defined(__x86_64__)
  if (HaveF16c()) return DecodeFp16F16c(src, dst, n);
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = Fp16ToFloat(src[i]);
}

// Calls fn(offset, floats, m) for consecutive blocks of the 16-bit data at
// src_bytes, each widened into an aligned float buffer.
template <typename Fn>
void ForEachDecodedBlock(WireDtype d, const void* src_bytes, size_t n, Fn fn) {
  alignas(64) uint16_t raw[kBlock];
  alignas(64) float wide[kBlock];
  const char* src = static_cast<const char*>(src_bytes);
  for (size_t done = 0; done < n; done += kBlock) {
    const size_t m = n - done < kBlock ? n - done : kBlock;
    std::memcpy(raw, src + done * sizeof(uint16_t), m * sizeof(uint16_t));
    Decode16(d, raw, wide, m);
    fn(done, wide, m);
  }
}

}  // namespace

uint16_t FloatToBf16(float f) { return ToBf16(f); }

float Bf16ToFloat(uint16_t h) { return FromBf16(h); }

uint16_t FloatToFp16(float f) {
  uint32_t x = Bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  uint32_t o;
  if (x > 0x7F800000u) {
    o = 0x7E00u | ((x >> 13) & 0x3FFu);  // quiet NaN, payload kept as F16C does
  } else if (x >= 0x47800000u) {
    o = 0x7C00u;  // >= 65536 or inf: inf (65520..65536 rounds there below)
  } else if (x < 0x38800000u) {
    // Below fp16's smallest normal (2^-14): adding 0.5 places the value's
    // multiples of 2^-24 (fp16's subnormal step) in float's low mantissa bits,
    // rounded to nearest even by the FPU.
    o = Bits(FromBits(x) + 0.5f) - Bits(0.5f);
  } else {
    // Normal: re-bias the exponent (127 -> 15) and round away 13 bits, ties
    // to even; a carry into the exponent (up to inf) is the right result.
    const uint32_t odd = (x >> 13) & 1u;
    x += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFu + odd;
    o = x >> 13;
  }
  return static_cast<uint16_t>(o | sign);
}

float Fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7FFFu;
  uint32_t x;
  if (em >= 0x7C00u) {
    x = 0x7F800000u | ((em & 0x3FFu) << 13);  // inf, NaN
  } else if (em >= 0x0400u) {
    x = (em << 13) + (static_cast<uint32_t>(127 - 15) << 23);  // normal
  } else {
    x = Bits(static_cast<float>(em) * 0x1p-24f);  // subnormal or zero, exact
  }
  return FromBits(x | sign);
}

size_t WireBytes(WireDtype d) { return d == WireDtype::kFp32 ? 4 : 2; }

const char* WireDtypeName(WireDtype d) {
  switch (d) {
    case WireDtype::kFp32:
      return "fp32";
    case WireDtype::kBf16:
      return "bf16";
    case WireDtype::kFp16:
      return "fp16";
  }
  return "unknown";
}

void EncodeWire(WireDtype d, const float* src, void* dst, size_t n) {
  if (d == WireDtype::kFp32) {
    if (n > 0) std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  alignas(64) uint16_t raw[kBlock];
  char* out = static_cast<char*>(dst);
  for (size_t done = 0; done < n; done += kBlock) {
    const size_t m = n - done < kBlock ? n - done : kBlock;
    Encode16(d, src + done, raw, m);
    std::memcpy(out + done * sizeof(uint16_t), raw, m * sizeof(uint16_t));
  }
}

void DecodeWire(WireDtype d, const void* src_bytes, float* dst, size_t n) {
  if (d == WireDtype::kFp32) {
    if (n > 0) std::memcpy(dst, src_bytes, n * sizeof(float));
    return;
  }
  ForEachDecodedBlock(d, src_bytes, n, [dst](size_t at, const float* w, size_t m) {
    std::memcpy(dst + at, w, m * sizeof(float));
  });
}

void DecodeAddWire(WireDtype d, float* dst, const void* src_bytes, size_t n) {
  if (d == WireDtype::kFp32) return AddIntoUnaligned(dst, src_bytes, n);
  ForEachDecodedBlock(d, src_bytes, n, [dst](size_t at, const float* w, size_t m) {
    AddInto(dst + at, w, m);
  });
}

void DecodeSumWire(WireDtype d, float* out, float* out2, const float* a,
                   const void* b_bytes, size_t n) {
  if (d == WireDtype::kFp32) return SumIntoUnaligned(out, out2, a, b_bytes, n);
  ForEachDecodedBlock(d, b_bytes, n, [=](size_t at, const float* w, size_t m) {
    SumIntoUnaligned(out + at, out2 == nullptr ? nullptr : out2 + at, a + at, w, m);
  });
}

void RoundToWire(WireDtype d, float* x, size_t n) {
  if (d == WireDtype::kFp32) return;
  alignas(64) uint16_t raw[kBlock];
  for (size_t done = 0; done < n; done += kBlock) {
    const size_t m = n - done < kBlock ? n - done : kBlock;
    Encode16(d, x + done, raw, m);
    Decode16(d, raw, x + done, m);
  }
}

}  // namespace gradsync
