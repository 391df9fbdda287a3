#include "common/grpc/block_pool.h"

#include <utility>

namespace gradsync {
namespace {

// Capacities are rounded so that the few sizes a collective uses (a full
// segment and a chunk's last, shorter one) share blocks: to a power of two up
// to 64 KiB, to a multiple of 64 KiB above.
size_t RoundCapacity(size_t n) {
  constexpr size_t kStep = (64 << 10) / sizeof(float);
  if (n >= kStep) return (n + kStep - 1) / kStep * kStep;
  size_t c = 16;
  while (c < n) c <<= 1;
  return c;
}

}  // namespace

std::shared_ptr<BlockPool> BlockPool::Create(size_t max_cached_bytes) {
  return std::shared_ptr<BlockPool>(new BlockPool(max_cached_bytes));
}

grpc::ByteBuffer BlockPool::Encode(TensorHeader header, size_t n,
                                   absl::FunctionRef<void(float*)> fill) {
  return EncodeAs(std::move(header), WireDtype::kFp32, n,
                  [&fill](void* b) { fill(static_cast<float*>(b)); });
}

grpc::ByteBuffer BlockPool::EncodeAs(TensorHeader header, WireDtype dtype, size_t n,
                                     absl::FunctionRef<void(void*)> fill) {
  if (n == 0) return EncodeHeaderOnly(std::move(header));
  // Blocks are counted in floats; a 16-bit frame uses half as many.
  const size_t floats = (n * WireBytes(dtype) + sizeof(float) - 1) / sizeof(float);
  const size_t capacity = RoundCapacity(floats);
  std::unique_ptr<float[]> block = Take(capacity);
  fill(block.get());
  // The release callback owns the block (as a raw pointer: std::function
  // must be copyable) and a reference to the pool; gRPC runs it exactly once.
  float* raw = block.release();
  return EncodeFrameBytes(std::move(header), dtype, raw, n,
                          [pool = shared_from_this(), raw, capacity] {
                            pool->Give(std::unique_ptr<float[]>(raw), capacity);
                          });
}

std::unique_ptr<float[]> BlockPool::Take(size_t capacity) {
  {
    absl::MutexLock lock(&mu_);
    auto it = free_.find(capacity);
    if (it != free_.end()) {
      std::unique_ptr<float[]> b = std::move(it->second);
      free_.erase(it);
      cached_ -= capacity * sizeof(float);
      return b;
    }
    ++allocations_;
  }
  return std::unique_ptr<float[]>(new float[capacity]);
}

void BlockPool::Give(std::unique_ptr<float[]> block, size_t capacity) {
  if (!block) return;
  absl::MutexLock lock(&mu_);
  if (cached_ + capacity * sizeof(float) > max_cached_) return;  // freed
  cached_ += capacity * sizeof(float);
  free_.emplace(capacity, std::move(block));
}

int64_t BlockPool::allocations() const {
  absl::MutexLock lock(&mu_);
  return allocations_;
}

size_t BlockPool::cached_bytes() const {
  absl::MutexLock lock(&mu_);
  return cached_;
}

}  // namespace gradsync
