#include "worker/collectives/recursive_doubling.h"

#include <algorithm>

namespace gradsync {

RecursiveDoublingAllreduce::RecursiveDoublingAllreduce(Transport* transport, size_t count,
                                                       AllreduceOptions options)
    : transport_(transport),
      count_(count),
      options_(std::move(options)),
      fold_(transport->size()),
      rank_(transport->rank()),
      vrank_(fold_.VirtualRank(rank_)),
      fold_peer_(fold_.FoldPeer(rank_)),
      segs_(Segments(Range{0, count}, SegmentElems(options_.segment_bytes))) {}

int RecursiveDoublingAllreduce::Partner(int j) const {
  return fold_.RealRank(vrank_ ^ (1 << j));
}

absl::Status RecursiveDoublingAllreduce::Run(float* data, int64_t step, int bucket) {
  if (transport_->size() == 1 || count_ == 0) return absl::OkStatus();
  transport_->BeginCollective(count_ * sizeof(float));
  const absl::Time deadline = options_.env->Now() + options_.timeout;
  if (vrank_ < 0) return RunExtra(data, step, bucket, deadline);
  // 1.
  const bool folded = fold_peer_ >= 0;
  if (folded) {
    absl::Status st = FoldIn(data, step, bucket, deadline);
    if (!st.ok()) return st;
  }
  // 2.
  for (int j = 0; j < fold_.levels(); ++j) {
    absl::Status st =
        Round(j, /*send_round0=*/j == 0 && !folded, data, step, bucket, deadline);
    if (!st.ok()) return st;
  }
  // 3.
  return transport_->WaitSendsReleased(deadline);
}

absl::Status RecursiveDoublingAllreduce::FoldIn(float* data, int64_t step, int bucket,
                                                absl::Time deadline) {
  // data + extra: the pair's sum is computed on this rank only.
  const ChunkTag out = MakeTag(step, bucket, CollectivePhase::kDoubling, 0, 0);
  return ReceiveEach(transport_, fold_peer_,
                     MakeTag(step, bucket, CollectivePhase::kFoldIn, 0, 0), segs_,
                     deadline, [&](size_t t, const Range& seg, const RecvChunk& chunk) {
                       ChunkTag tag = out;
                       tag.segment = static_cast<int32_t>(t);
                       float* d = data + seg.begin;
                       return transport_->SendSum(Partner(0), tag, d, chunk, d);
                     });
}

absl::Status RecursiveDoublingAllreduce::Round(int j, bool send_round0, float* data,
                                               int64_t step, int bucket,
                                               absl::Time deadline) {
  const bool last = j + 1 == fold_.levels();
  // Where this round's sums go next: the next partner, the folded extra rank
  // after the last round, or nowhere.
  const int next = !last ? Partner(j + 1) : fold_peer_;
  const ChunkTag next_tag =
      !last ? MakeTag(step, bucket, CollectivePhase::kDoubling, j + 1, 0)
            : MakeTag(step, bucket, CollectivePhase::kFoldOut, 0, 0);
  const ChunkTag tag = MakeTag(step, bucket, CollectivePhase::kDoubling, j, 0);
  size_t sent = 0;
  // Segment t goes out before we overwrite it with the sum of segment t.
  auto send_ahead = [&](size_t t) {
    const size_t to = std::min(segs_.size(), t + kSendAhead);
    absl::Status st = SendSegments(transport_, Partner(0), tag, data, segs_, sent, to);
    sent = to;
    return st;
  };
  auto on_received = [&](size_t t, const Range& seg, const RecvChunk& chunk) {
    float* d = data + seg.begin;
    if (next < 0) {
      chunk.AddTo(d);
      // A rank with a folded extra rank keeps the sum as sent to it
      // (SendSum below); with a 16-bit wire the others must round alike.
      RoundToWire(transport_->wire_dtype(), d, seg.size);
      return absl::OkStatus();
    }
    ChunkTag out = next_tag;
    out.segment = static_cast<int32_t>(t);
    return transport_->SendSum(next, out, d, chunk, d);
  };
  if (!send_round0) {
    return ReceiveEach(transport_, Partner(j), tag, segs_, deadline, on_received);
  }
  return ReceiveEach(transport_, Partner(j), tag, segs_, deadline, on_received,
                     send_ahead);
}

absl::Status RecursiveDoublingAllreduce::RunExtra(float* data, int64_t step, int bucket,
                                                  absl::Time deadline) {
  return RunExtraRank(transport_, fold_peer_, data, step, bucket, segs_, segs_, deadline);
}

}  // namespace gradsync
