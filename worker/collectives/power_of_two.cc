#include "worker/collectives/power_of_two.h"

#include <algorithm>
#include <utility>

namespace gradsync {

PowerOfTwoFold::PowerOfTwoFold(int size) {
  while (p_ * 2 <= size) {
    p_ *= 2;
    ++levels_;
  }
  extra_ = size - p_;
}

int PowerOfTwoFold::VirtualRank(int rank) const {
  if (rank < 2 * extra_) return rank % 2 == 0 ? rank / 2 : -1;
  return rank - extra_;
}

int PowerOfTwoFold::RealRank(int vrank) const {
  return vrank < extra_ ? 2 * vrank : vrank + extra_;
}

int PowerOfTwoFold::FoldPeer(int rank) const {
  if (rank >= 2 * extra_) return -1;
  return rank % 2 == 0 ? rank + 1 : rank - 1;
}

absl::Status ReceiveEach(Transport* transport, int peer, ChunkTag tag,
                         const std::vector<Range>& segs, absl::Time deadline,
                         const OnReceived& on_received,
                         const std::function<absl::Status(size_t)>& send_ahead) {
  for (size_t t = 0; t < segs.size(); ++t) {
    if (send_ahead) {
      absl::Status st = send_ahead(t);
      if (!st.ok()) return st;
    }
    tag.segment = static_cast<int32_t>(t);
    auto chunk = transport->Recv(peer, tag, segs[t].size, deadline);
    if (!chunk.ok()) return chunk.status();
    absl::Status st = on_received(t, segs[t], **chunk);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status SendSegments(Transport* transport, int peer, ChunkTag tag, float* data,
                          const std::vector<Range>& segs, size_t from, size_t to) {
  to = std::min(to, segs.size());
  for (size_t t = from; t < to; ++t) {
    tag.segment = static_cast<int32_t>(t);
    absl::Status st = transport->Send(peer, tag, data + segs[t].begin, segs[t].size);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status RunExtraRank(Transport* transport, int fold_peer, float* data, int64_t step,
                          int bucket, const std::vector<Range>& fold_in,
                          const std::vector<Range>& fold_out, absl::Time deadline) {
  absl::Status st = SendSegments(transport, fold_peer,
                                 MakeTag(step, bucket, CollectivePhase::kFoldIn, 0, 0),
                                 data, fold_in, 0, fold_in.size());
  if (!st.ok()) return st;
  st = ReceiveEach(transport, fold_peer,
                   MakeTag(step, bucket, CollectivePhase::kFoldOut, 0, 0), fold_out,
                   deadline, [&](size_t, const Range& seg, const RecvChunk& chunk) {
                     chunk.CopyTo(data + seg.begin);
                     return absl::OkStatus();
                   });
  if (!st.ok()) return st;
  return transport->WaitSendsReleased(deadline);
}

}  // namespace gradsync
