// libFuzzer target: DecodedFrame::Parse over arbitrary bytes.
//
// The first input byte picks a slice size (1 + data[0] % 64); the rest is cut
// into slices of that size so headers, varints and floats straddle slice
// boundaries. After a successful parse every accessor is exercised (CopyTo,
// AddTo, and through them ForEachPiece) into buffers of exactly count() floats,
// so ASan catches any read or write past the data.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "common/grpc/tensor_frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 64;
  ++data;
  --size;
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < size; at += piece) {
    const size_t n = size - at < piece ? size - at : piece;
    slices.emplace_back(data + at, n);  // copies
  }
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  absl::StatusOr<gradsync::DecodedFrame> frame = gradsync::DecodedFrame::Parse(buffer);
  if (!frame.ok()) return 0;
  const size_t count = frame->count();
  // Parse checked count against the bytes that arrived, so this is bounded by
  // the input size.
  if (count > size) __builtin_trap();
  std::vector<float> copy(count);
  frame->CopyTo(copy.data());
  std::vector<float> sum(count, 1.0f);
  frame->AddTo(sum.data());
  (void)frame->header().job_id().size();
  return 0;
}
