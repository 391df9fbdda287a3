#include "worker/collectives/sub_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gradsync {

absl::StatusOr<std::unique_ptr<SubTransport>> SubTransport::Create(
    Transport* base, std::vector<int> ranks) {
  if (ranks.empty()) {
    return absl::InvalidArgumentError("sub-transport: no ranks");
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= base->size() || (i > 0 && ranks[i] <= ranks[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("sub-transport: ranks must be increasing within [0, ",
                       base->size(), "); entry ", i, " is ", ranks[i]));
    }
  }
  auto it = std::find(ranks.begin(), ranks.end(), base->rank());
  if (it == ranks.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sub-transport: rank ", base->rank(), " is not one of its ranks"));
  }
  const int rank = static_cast<int>(it - ranks.begin());
  return std::unique_ptr<SubTransport>(new SubTransport(base, std::move(ranks), rank));
}

SubTransport::SubTransport(Transport* base, std::vector<int> ranks, int rank)
    : base_(base), ranks_(std::move(ranks)), rank_(rank) {}

absl::StatusOr<int> SubTransport::Global(int peer) const {
  if (peer < 0 || peer >= size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sub-transport: peer ", peer, " outside [0, ", size(), ")"));
  }
  return ranks_[peer];
}

absl::Status SubTransport::Send(int peer, const ChunkTag& tag, float* data, size_t n,
                                uint64_t checksum) {
  absl::StatusOr<int> g = Global(peer);
  if (!g.ok()) return g.status();
  return base_->Send(*g, tag, data, n, checksum);
}

absl::Status SubTransport::SendSum(int peer, const ChunkTag& tag, const float* a,
                                   const RecvChunk& chunk, float* store) {
  absl::StatusOr<int> g = Global(peer);
  if (!g.ok()) return g.status();
  return base_->SendSum(*g, tag, a, chunk, store);
}

absl::Status SubTransport::Forward(int peer, const ChunkTag& tag, const RecvChunk& chunk,
                                   uint64_t checksum) {
  absl::StatusOr<int> g = Global(peer);
  if (!g.ok()) return g.status();
  return base_->Forward(*g, tag, chunk, checksum);
}

absl::StatusOr<std::unique_ptr<RecvChunk>> SubTransport::Recv(int peer,
                                                              const ChunkTag& expected,
                                                              size_t n,
                                                              absl::Time deadline) {
  absl::StatusOr<int> g = Global(peer);
  if (!g.ok()) return g.status();
  return base_->Recv(*g, expected, n, deadline);
}

absl::Status SubTransport::WaitSendsReleased(absl::Time deadline) {
  return base_->WaitSendsReleased(deadline);
}

void SubTransport::Abort(const absl::Status& status) { base_->Abort(status); }

}  // namespace gradsync
