// Reduction and checksum kernels on flat float32 buffers (CPU).
//
// All functions are thread-compatible: they touch only the memory passed in.
#ifndef GRADSYNC_COMMON_KERNELS_H_
#define GRADSYNC_COMMON_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace gradsync {

// dst[i] += src[i] for i in [0, n).
void AddInto(float* dst, const float* src, size_t n);

// dst[i] += float read from src_bytes + 4*i. `src_bytes` may be unaligned
// (received network slices are not 4-byte aligned in general).
void AddIntoUnaligned(float* dst, const void* src_bytes, size_t n);

// out[i] = a[i] + float read from b_bytes + 4*i, and out2[i] the same when
// out2 is not null (one pass writing both). `b_bytes` may be unaligned; `out`
// or `out2` may alias `a`. Same per-element order as AddInto: a + b.
void SumIntoUnaligned(float* out, float* out2, const float* a, const void* b_bytes,
                      size_t n);

// x[i] *= a.
void Scale(float* x, float a, size_t n);

// Weight prediction (DeviceModel::PredictParams): for each i,
// d = w[i] - prev[i]; prev[i] = w[i]; w[i] += s * d. `prev` ends holding
// the parameters as they were, `w` the extrapolated ones. No fused
// multiply-add, so every rank gets the same bits.
void PredictAhead(float* w, float* prev, float s, size_t n);

// 64-bit FNV-1a over the bytes of x[0..n). Equal buffers give equal sums;
// used to check that replicas are bit-identical.
uint64_t Checksum(const float* x, size_t n);

// Checksum as 16 lowercase hex digits.
std::string ChecksumHex(const float* x, size_t n);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_KERNELS_H_
