#include "common/kernels.h"

#include <cstring>

#include "common/vector_clones.h"

namespace gradsync {

GRADSYNC_VECTOR_CLONES
void AddInto(float* dst, const float* src, size_t n) {
  // Plain loop: the compiler vectorizes it; the order of additions per element
  // is fixed, so results are bit-identical across runs and replicas.
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

GRADSYNC_VECTOR_CLONES
void AddIntoUnaligned(float* dst, const void* src_bytes, size_t n) {
  // memcpy in fixed-size chunks into an aligned stack buffer avoids undefined
  // behaviour from misaligned float loads while keeping the inner loop
  // vectorizable.
  constexpr size_t kChunk = 1024;
  float buf[kChunk];
  const char* src = static_cast<const char*>(src_bytes);
  size_t done = 0;
  while (done < n) {
    const size_t m = n - done < kChunk ? n - done : kChunk;
    std::memcpy(buf, src + done * sizeof(float), m * sizeof(float));
    float* d = dst + done;
    for (size_t i = 0; i < m; ++i) d[i] += buf[i];
    done += m;
  }
}

GRADSYNC_VECTOR_CLONES
void SumIntoUnaligned(float* out, float* out2, const float* a, const void* b_bytes,
                      size_t n) {
  constexpr size_t kChunk = 1024;
  float buf[kChunk];
  const char* b = static_cast<const char*>(b_bytes);
  size_t done = 0;
  while (done < n) {
    const size_t m = n - done < kChunk ? n - done : kChunk;
    std::memcpy(buf, b + done * sizeof(float), m * sizeof(float));
    const float* x = a + done;
    float* o = out + done;
    if (out2 == nullptr) {
      for (size_t i = 0; i < m; ++i) o[i] = x[i] + buf[i];
    } else {
      float* o2 = out2 + done;
      for (size_t i = 0; i < m; ++i) o[i] = o2[i] = x[i] + buf[i];
    }
    done += m;
  }
}

GRADSYNC_VECTOR_CLONES
void Scale(float* x, float a, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] *= a;
}

GRADSYNC_VECTOR_CLONES
void PredictAhead(float* __restrict w, float* __restrict prev, float s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float p = w[i];
    const float d = p - prev[i];
    prev[i] = p;
    w[i] = p + s * d;
  }
}

uint64_t Checksum(const float* x, size_t n) {
  constexpr uint64_t kOffsetBasis = 14695981039346656037ULL;
  constexpr uint64_t kPrime = 1099511628211ULL;
  uint64_t h = kOffsetBasis;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(x);
  const size_t bytes = n * sizeof(float);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= kPrime;
  }
  return h;
}

std::string ChecksumHex(const float* x, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  uint64_t h = Checksum(x, n);
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[i] = kDigits[h & 0xf];
    h >>= 4;
  }
  return out;
}

}  // namespace gradsync
