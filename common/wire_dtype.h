// Element formats of tensors on the wire, and the conversion kernels between
// them and float32 (CPU).
//
// Gradients and parameters are float32 in memory. With a 16-bit wire format
// they are rounded (to nearest, ties to even) when written into a frame and
// widened when read, so every sum is still computed in float32; only the
// values that travel lose precision. NaN stays NaN; float32 values beyond
// fp16's range become ±inf (bf16 has float32's range).
//
// All functions are thread-compatible: they touch only the memory passed in.
// Byte pointers may be unaligned (received network slices are).
#ifndef GRADSYNC_COMMON_WIRE_DTYPE_H_
#define GRADSYNC_COMMON_WIRE_DTYPE_H_

#include <cstddef>
#include <cstdint>

namespace gradsync {

enum class WireDtype : int32_t {
  kFp32 = 0,
  kBf16 = 1,
  kFp16 = 2,
};

// Bytes per element: 4 or 2.
size_t WireBytes(WireDtype d);

// "fp32", "bf16", "fp16".
const char* WireDtypeName(WireDtype d);

// True for the 16-bit formats: what a rank sends is not what it computed.
inline bool IsLossy(WireDtype d) { return d != WireDtype::kFp32; }

// dst (n * WireBytes(d) bytes) = src[0..n) in format d.
void EncodeWire(WireDtype d, const float* src, void* dst, size_t n);

// dst[i] = element i of src_bytes (format d) as float32.
void DecodeWire(WireDtype d, const void* src_bytes, float* dst, size_t n);

// dst[i] += element i of src_bytes.
void DecodeAddWire(WireDtype d, float* dst, const void* src_bytes, size_t n);

// out[i] = a[i] + element i of b_bytes, and out2[i] too when out2 is not null;
// out or out2 may alias a. The order per element is a + b, as AddInto's.
void DecodeSumWire(WireDtype d, float* out, float* out2, const float* a,
                   const void* b_bytes, size_t n);

// x[i] = the value x[i] arrives as: DecodeWire(EncodeWire(x[i])). A no-op for
// fp32. Idempotent.
void RoundToWire(WireDtype d, float* x, size_t n);

// Scalar conversions (exposed for tests).
uint16_t FloatToBf16(float f);
float Bf16ToFloat(uint16_t h);
uint16_t FloatToFp16(float f);
float Fp16ToFloat(uint16_t h);

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_WIRE_DTYPE_H_
