#include "worker/sync/stall_transport.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gradsync {

StallTransport::StallTransport(Transport* inner, const StallWatch* watch,
                               std::vector<std::string> peer_addresses)
    : ForwardingTransport(inner), watch_(watch), peers_(std::move(peer_addresses)) {}

StallReport StallTransport::Describe(int peer, const ChunkTag& expected) const {
  StallReport r;
  r.waiting_for = absl::StrCat("rank ", peer);
  if (peer >= 0 && peer < static_cast<int>(peers_.size())) {
    absl::StrAppend(&r.waiting_for, " (", peers_[peer], ")");
  }
  r.step = expected.step;
  r.bucket = expected.bucket;
  r.phase = CollectivePhaseName(expected.phase);
  return r;
}

absl::StatusOr<std::unique_ptr<RecvChunk>> StallTransport::Recv(int peer,
                                                                const ChunkTag& expected,
                                                                size_t n,
                                                                absl::Time deadline) {
  StallWait wait(watch_);
  while (true) {
    const absl::Time until = wait.Until(deadline);
    absl::StatusOr<std::unique_ptr<RecvChunk>> chunk =
        ForwardingTransport::Recv(peer, expected, n, until);
    if (until >= deadline || !absl::IsDeadlineExceeded(chunk.status())) {
      if (!chunk.ok()) wait.Failed();
      return chunk;
    }
    wait.Check([&] { return Describe(peer, expected); });
  }
}

}  // namespace gradsync
