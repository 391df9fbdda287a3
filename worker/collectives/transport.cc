#include "worker/collectives/transport.h"

#include <cstring>
#include <vector>

namespace gradsync {

absl::Status Transport::SendSum(int peer, const ChunkTag& tag, const float* a,
                                const RecvChunk& chunk, float* store) {
  std::vector<float> sum(chunk.count());
  chunk.SumTo(a, sum.data(), nullptr);
  absl::Status st = Send(peer, tag, sum.data(), sum.size());  // rounds `sum`
  if (st.ok() && store != nullptr && !sum.empty()) {
    std::memcpy(store, sum.data(), sum.size() * sizeof(float));
  }
  return st;
}

absl::Status Transport::Forward(int peer, const ChunkTag& tag, const RecvChunk& chunk,
                                uint64_t checksum) {
  std::vector<float> copy(chunk.count());
  chunk.CopyTo(copy.data());
  return Send(peer, tag, copy.data(), copy.size(), checksum);
}

}  // namespace gradsync
