#include "worker/metrics/metered_transport.h"

#include <string>

namespace gradsync {
namespace {

// A counter per other rank (null for `rank` itself, which is never a peer).
std::vector<Counter*> PerPeer(CounterFamily* family, int rank, int size) {
  std::vector<Counter*> out;
  for (int p = 0; p < size; ++p) {
    out.push_back(p == rank ? nullptr : family->WithLabels({std::to_string(p)}));
  }
  return out;
}

}  // namespace

MeteredTransport::MeteredTransport(Transport* inner, CounterFamily* sent_bytes,
                                   CounterFamily* received_bytes)
    : ForwardingTransport(inner),
      sent_(PerPeer(sent_bytes, inner->rank(), inner->size())),
      received_(PerPeer(received_bytes, inner->rank(), inner->size())) {}

absl::Status MeteredTransport::Count(const std::vector<Counter*>& counters, int peer,
                                     size_t elements, absl::Status st) const {
  if (st.ok() && peer >= 0 && peer < static_cast<int>(counters.size()) &&
      counters[peer] != nullptr) {
    counters[peer]->Add(static_cast<double>(elements * WireBytes(inner()->wire_dtype())));
  }
  return st;
}

absl::Status MeteredTransport::Send(int peer, const ChunkTag& tag, float* data, size_t n,
                                    uint64_t checksum) {
  return Count(sent_, peer, n, inner()->Send(peer, tag, data, n, checksum));
}

absl::Status MeteredTransport::SendSum(int peer, const ChunkTag& tag, const float* a,
                                       const RecvChunk& chunk, float* store) {
  return Count(sent_, peer, chunk.count(), inner()->SendSum(peer, tag, a, chunk, store));
}

absl::Status MeteredTransport::Forward(int peer, const ChunkTag& tag,
                                       const RecvChunk& chunk, uint64_t checksum) {
  return Count(sent_, peer, chunk.count(), inner()->Forward(peer, tag, chunk, checksum));
}

absl::StatusOr<std::unique_ptr<RecvChunk>> MeteredTransport::Recv(
    int peer, const ChunkTag& expected, size_t n, absl::Time deadline) {
  absl::StatusOr<std::unique_ptr<RecvChunk>> chunk =
      inner()->Recv(peer, expected, n, deadline);
  if (chunk.ok()) {
    Count(received_, peer, (*chunk)->count(), absl::OkStatus()).IgnoreError();
  }
  return chunk;
}

}  // namespace gradsync
