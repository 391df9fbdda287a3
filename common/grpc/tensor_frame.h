// TensorFrame encoding without protobuf copies of the tensor data.
//
// A frame on the wire is the protobuf encoding of gradsync.v1.TensorFrame:
//   0x0A varint(len) <TensorHeader bytes>   field 1, written by protobuf
//   0x12 varint(b*count) <data>              field 2, a slice over our memory
// where the data are `count` elements of header.dtype, b = 4 (fp32) or 2
// (bf16, fp16) bytes each.
// Encoding puts a small copied slice for the prefix and a zero-copy slice over
// the caller's floats into one grpc::ByteBuffer. Decoding keeps references to
// the received slices and copies or reduces straight out of them, handling
// floats that straddle slice boundaries and unaligned data.
#ifndef GRADSYNC_COMMON_GRPC_TENSOR_FRAME_H_
#define GRADSYNC_COMMON_GRPC_TENSOR_FRAME_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "absl/status/statusor.h"
#include "common/spec/wire_dtype_proto.h"
#include "common/wire_dtype.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

using v1::TensorHeader;

// WireDtypeOf and WireDtypeToProto (the wire's dtype field, both ways) are
// in common/spec/wire_dtype_proto.h.

// Encodes header (its `count` is set to n, its dtype to fp32) and
// data[0..n). gRPC reads `data` without copying: the memory must stay valid
// and unchanged until `on_release` runs (on an arbitrary thread, exactly
// once, possibly after the RPC ended).
grpc::ByteBuffer EncodeFrame(TensorHeader header, const float* data, size_t n,
                             std::function<void()> on_release);

// As EncodeFrame, for n elements of `dtype` already encoded at `bytes`
// (n * WireBytes(dtype) bytes).
grpc::ByteBuffer EncodeFrameBytes(TensorHeader header, WireDtype dtype, const void* bytes,
                                  size_t n, std::function<void()> on_release);

// data[0..n) converted to `dtype` into memory the frame owns (a pass over
// the data, for senders whose memory cannot be lent to gRPC).
grpc::ByteBuffer EncodeFrameAs(TensorHeader header, WireDtype dtype, const float* data,
                               size_t n);

// As above; the frame keeps `owner` alive until gRPC is done with it.
grpc::ByteBuffer EncodeFrameShared(TensorHeader header,
                                   std::shared_ptr<const std::vector<float>> owner,
                                   size_t offset, size_t n);

// Header-only frame (count 0).
grpc::ByteBuffer EncodeHeaderOnly(TensorHeader header);

// A received frame. Holds references to the received slices; cheap to move.
class DecodedFrame {
 public:
  // INVALID_ARGUMENT when the bytes are not a TensorFrame, its dtype is
  // unknown, or the data length is not header.count elements of it.
  static absl::StatusOr<DecodedFrame> Parse(const grpc::ByteBuffer& buffer);

  const TensorHeader& header() const { return header_; }
  size_t count() const { return header_.count(); }
  WireDtype dtype() const { return dtype_; }

  // The data widened to float32:
  // dst[0..count) = data.
  void CopyTo(float* dst) const;
  // dst[0..count) += data.
  void AddTo(float* dst) const;
  // out[i] = a[i] + data[i], and out2[i] too when out2 is not null (out2 may
  // alias a).
  void SumTo(const float* a, float* out, float* out2) const;

  // The same data under a new header (its count and dtype are set), without
  // copying the data: the new buffer refers to this frame's received slices.
  grpc::ByteBuffer Reframe(TensorHeader header) const;

 private:
  // Calls fn(dst_element_offset, bytes, nbytes) over the data, one call per
  // contiguous piece, pieces always whole elements (straddling elements are
  // assembled in a small stack buffer).
  void ForEachPiece(const std::function<void(size_t, const char*, size_t)>& fn) const;

  size_t data_bytes() const { return count() * WireBytes(dtype_); }

  TensorHeader header_;
  WireDtype dtype_ = WireDtype::kFp32;
  std::vector<grpc::Slice> slices_;
  size_t first_slice_ = 0;   // slice where data begins
  size_t first_offset_ = 0;  // byte offset in that slice
  std::string fallback_;     // data copied here when the fast path declined
  bool use_fallback_ = false;
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_GRPC_TENSOR_FRAME_H_
