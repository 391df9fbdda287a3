// Reusable send buffers for tensor frames. A sender takes a block, writes the
// payload straight into it (a copy, or a reduction kernel's output), and
// hands it to gRPC; the block comes back when gRPC releases the slice, which
// may be after the sender is gone (each block keeps the pool alive).
//
// Why: a fresh 1 MiB buffer per frame is a fresh mmap for glibc, i.e. 256 page
// faults before the first byte is written; measured, page faults were the
// largest single cost of the ring on loopback (docs/architecture.md
// "Send blocks").
#ifndef GRADSYNC_COMMON_GRPC_BLOCK_POOL_H_
#define GRADSYNC_COMMON_GRPC_BLOCK_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/tensor_frame.h"

namespace gradsync {

// Thread-safe.
class BlockPool : public std::enable_shared_from_this<BlockPool> {
 public:
  // Keeps at most `max_cached_bytes` of returned blocks for reuse; beyond
  // that, returned blocks are freed.
  static std::shared_ptr<BlockPool> Create(size_t max_cached_bytes);

  // A frame with `header` and n floats that `fill` writes into a pooled
  // block (fill gets the block's memory, n floats long).
  grpc::ByteBuffer Encode(TensorHeader header, size_t n,
                          absl::FunctionRef<void(float*)> fill);

  // A frame of n elements of `dtype`, whose n * WireBytes(dtype) bytes
  // `fill` writes into a pooled block.
  grpc::ByteBuffer EncodeAs(TensorHeader header, WireDtype dtype, size_t n,
                            absl::FunctionRef<void(void*)> fill);

  // Blocks allocated so far (not taken from the cache), and bytes cached now.
  int64_t allocations() const;
  size_t cached_bytes() const;

 private:
  explicit BlockPool(size_t max_cached_bytes) : max_cached_(max_cached_bytes) {}
  std::unique_ptr<float[]> Take(size_t capacity);
  void Give(std::unique_ptr<float[]> block, size_t capacity);

  const size_t max_cached_;
  mutable absl::Mutex mu_;
  std::multimap<size_t, std::unique_ptr<float[]>> free_ ABSL_GUARDED_BY(mu_);
  size_t cached_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t allocations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_GRPC_BLOCK_POOL_H_
