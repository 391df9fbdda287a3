#include "worker/collectives/halving_doubling.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace gradsync {
namespace {

void Append(std::vector<Range>* out, const std::vector<Range>& more) {
  out->insert(out->end(), more.begin(), more.end());
}

// One message of data[r]; none when r is empty.
absl::Status SendRange(Transport* transport, int peer, const ChunkTag& tag, float* data,
                       const Range& r) {
  if (r.size == 0) return absl::OkStatus();
  return transport->Send(peer, tag, data + r.begin, r.size);
}

enum class Into { kAdd, kCopy };

// One message of r.size floats, added into or copied to data[r]; none when
// r is empty.
absl::Status ReceiveRange(Transport* transport, int peer, const ChunkTag& tag,
                          const Range& r, float* data, Into into, absl::Time deadline) {
  if (r.size == 0) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<RecvChunk>> chunk =
      transport->Recv(peer, tag, r.size, deadline);
  if (!chunk.ok()) return chunk.status();
  if (into == Into::kAdd) {
    (*chunk)->AddTo(data + r.begin);
  } else {
    (*chunk)->CopyTo(data + r.begin);
  }
  return absl::OkStatus();
}

}  // namespace

HalvingDoublingAllreduce::HalvingDoublingAllreduce(Transport* transport, size_t count,
                                                   AllreduceOptions options)
    : transport_(transport),
      count_(count),
      options_(std::move(options)),
      fold_(transport->size()),
      rank_(transport->rank()),
      vrank_(fold_.VirtualRank(rank_)),
      fold_peer_(fold_.FoldPeer(rank_)) {
  const int p = fold_.p();
  const int levels = fold_.levels();
  const size_t seg = SegmentElems(options_.segment_bytes);
  blocks_ = PartitionEven(count_, p);
  in_rounds_ = count_ * sizeof(float) <= kHdRoundBytes && count_ <= seg;
  if (in_rounds_) return;  // RunInRounds needs the blocks only
  for (const Range& block : blocks_) {
    block_segs_.push_back(Segments(block, seg));
  }
  // The virtual rank of this rank, or of the partner an extra rank folds into.
  const int v = vrank_ >= 0 ? vrank_ : fold_.VirtualRank(fold_peer_);
  if (fold_peer_ >= 0) {
    fold_in_ = FoldInOrder(v);
    fold_out_ = DoublingOrder(v, levels);
  }
  if (vrank_ < 0 || levels == 0) return;
  round0_send_ = HalvingOrder(0, v ^ (p / 2));
  size_t offset = block_segs_[v].size();
  for (int k = 0; k < levels; ++k) {
    halving_recv_.push_back(HalvingOrder(k, v));
    onward_.push_back(k + 1 < levels ? HalvingOrder(k + 1, v ^ (p >> (k + 2))).size()
                                     : 0);
    doubling_recv_.push_back(DoublingOrder(v ^ (1 << k), k));
    forward_offset_.push_back(offset);
    offset += doubling_recv_.back().size();
  }
}

std::vector<Range> HalvingDoublingAllreduce::BlockSegs(int first, int n) const {
  std::vector<Range> out;
  for (int b = first; b < first + n; ++b) Append(&out, block_segs_[b]);
  return out;
}

std::vector<Range> HalvingDoublingAllreduce::HalvingOrder(int k, int u) const {
  // u keeps m blocks after round k; in round k+1 it gives half of them to
  // u ^ (m/2), in the order that rank receives them, so they go first.
  const int m = fold_.p() >> (k + 1);
  if (m == 1) return block_segs_[u];
  const int half = m / 2;
  std::vector<Range> out = HalvingOrder(k + 1, u ^ half);
  Append(&out, BlockSegs(u & ~(half - 1), half));
  return out;
}

std::vector<Range> HalvingDoublingAllreduce::DoublingOrder(int w, int j) const {
  std::vector<Range> out = block_segs_[w];
  for (int i = 0; i < j; ++i) Append(&out, DoublingOrder(w ^ (1 << i), i));
  return out;
}

std::vector<Range> HalvingDoublingAllreduce::FoldInOrder(int u) const {
  const int half = fold_.p() / 2;
  std::vector<Range> out = HalvingOrder(0, u ^ half);
  Append(&out, BlockSegs(u & ~(half - 1), half));
  return out;
}

int HalvingDoublingAllreduce::HalvingPartner(int k) const {
  return fold_.RealRank(vrank_ ^ (fold_.p() >> (k + 1)));
}

int HalvingDoublingAllreduce::DoublingPartner(int j) const {
  return fold_.RealRank(vrank_ ^ (1 << j));
}

absl::Status HalvingDoublingAllreduce::Run(float* data, int64_t step, int bucket) {
  if (transport_->size() == 1 || count_ == 0) return absl::OkStatus();
  transport_->BeginCollective(count_ * sizeof(float));
  const absl::Time deadline = options_.env->Now() + options_.timeout;
  if (in_rounds_) return RunInRounds(data, step, bucket, deadline);
  if (vrank_ < 0) return RunExtra(data, step, bucket, deadline);
  const bool folded = fold_peer_ >= 0;
  absl::Status st;
  // 1.
  if (folded) st = FoldIn(data, step, bucket, deadline);
  // 2.
  for (int k = 0; k < fold_.levels() && st.ok(); ++k) {
    st = HalvingRound(k, /*send_round0=*/k == 0 && !folded, data, step, bucket, deadline);
  }
  // 3.
  if (st.ok()) st = SendOwnBlock(data, step, bucket);
  // 4.
  for (int j = 0; j < fold_.levels() && st.ok(); ++j) {
    st = DoublingRound(j, data, step, bucket, deadline);
  }
  // 5.
  if (!st.ok()) return st;
  return transport_->WaitSendsReleased(deadline);
}

absl::Status HalvingDoublingAllreduce::FoldIn(float* data, int64_t step, int bucket,
                                              absl::Time deadline) {
  const size_t given_away = round0_send_.size();
  ChunkTag out = MakeTag(step, bucket, CollectivePhase::kHalving, 0, 0);
  return ReceiveEach(
      transport_, fold_peer_, MakeTag(step, bucket, CollectivePhase::kFoldIn, 0, 0),
      fold_in_, deadline, [&](size_t t, const Range& seg, const RecvChunk& chunk) {
        float* d = data + seg.begin;
        if (t >= given_away) {
          chunk.AddTo(d);
          return absl::OkStatus();
        }
        out.segment = static_cast<int32_t>(t);
        return transport_->SendSum(HalvingPartner(0), out, d, chunk, nullptr);
      });
}

absl::Status HalvingDoublingAllreduce::HalvingRound(int k, bool send_round0, float* data,
                                                    int64_t step, int bucket,
                                                    absl::Time deadline) {
  const bool last = k + 1 == fold_.levels();
  const int next = last ? DoublingPartner(0) : HalvingPartner(k + 1);
  const ChunkTag next_tag =
      last ? MakeTag(step, bucket, CollectivePhase::kDoubling, 0, 0)
           : MakeTag(step, bucket, CollectivePhase::kHalving, k + 1, 0);
  const size_t onward = onward_[k];
  auto on_received = [&](size_t t, const Range& seg, const RecvChunk& chunk) {
    float* d = data + seg.begin;
    if (!last && t >= onward) {
      chunk.AddTo(d);
      return absl::OkStatus();
    }
    ChunkTag out = next_tag;
    out.segment = static_cast<int32_t>(t);
    return transport_->SendSum(next, out, d, chunk, last ? d : nullptr);
  };
  const ChunkTag tag = MakeTag(step, bucket, CollectivePhase::kHalving, k, 0);
  if (!send_round0) {
    return ReceiveEach(transport_, HalvingPartner(k), tag, halving_recv_[k], deadline,
                       on_received);
  }
  // With L = 1 the partner of round 0 is also the doubling round-0 partner
  // that on_received sends to: all halving segments must precede those.
  const size_t ahead = fold_.levels() == 1 ? round0_send_.size() : kSendAhead;
  size_t sent = 0;
  auto send_ahead = [&](size_t t) {
    const size_t to = std::min(round0_send_.size(), t + ahead);
    absl::Status st =
        SendSegments(transport_, HalvingPartner(0), tag, data, round0_send_, sent, to);
    sent = to;
    return st;
  };
  absl::Status st = ReceiveEach(transport_, HalvingPartner(0), tag, halving_recv_[0],
                                deadline, on_received, send_ahead);
  if (!st.ok()) return st;
  return SendSegments(transport_, HalvingPartner(0), tag, data, round0_send_, sent,
                      round0_send_.size());
}

absl::Status HalvingDoublingAllreduce::SendOwnBlock(float* data, int64_t step,
                                                    int bucket) {
  const std::vector<Range>& own = block_segs_[vrank_];
  // Round 0's partner got it from the last halving round.
  for (int j = 1; j < fold_.levels(); ++j) {
    absl::Status st =
        SendSegments(transport_, DoublingPartner(j),
                     MakeTag(step, bucket, CollectivePhase::kDoubling, j, 0), data, own,
                     0, own.size());
    if (!st.ok()) return st;
  }
  if (fold_peer_ < 0) return absl::OkStatus();
  return SendSegments(transport_, fold_peer_,
                      MakeTag(step, bucket, CollectivePhase::kFoldOut, 0, 0), data, own,
                      0, own.size());
}

absl::Status HalvingDoublingAllreduce::DoublingRound(int j, float* data, int64_t step,
                                                     int bucket, absl::Time deadline) {
  const size_t offset = forward_offset_[j];
  return ReceiveEach(
      transport_, DoublingPartner(j),
      MakeTag(step, bucket, CollectivePhase::kDoubling, j, 0), doubling_recv_[j],
      deadline, [&](size_t t, const Range& seg, const RecvChunk& chunk) {
        chunk.CopyTo(data + seg.begin);
        for (int i = j + 1; i < fold_.levels(); ++i) {
          absl::Status st = transport_->Forward(
              DoublingPartner(i),
              MakeTag(step, bucket, CollectivePhase::kDoubling, i, offset + t), chunk);
          if (!st.ok()) return st;
        }
        if (fold_peer_ < 0) return absl::OkStatus();
        return transport_->Forward(
            fold_peer_, MakeTag(step, bucket, CollectivePhase::kFoldOut, 0, offset + t),
            chunk);
      });
}

absl::Status HalvingDoublingAllreduce::RunExtra(float* data, int64_t step, int bucket,
                                                absl::Time deadline) {
  return RunExtraRank(transport_, fold_peer_, data, step, bucket, fold_in_, fold_out_,
                      deadline);
}

Range HalvingDoublingAllreduce::Blocks(int first, int n) const {
  if (n <= 0) return Range{blocks_[first].begin, 0};
  const Range& last = blocks_[first + n - 1];
  return Range{blocks_[first].begin, last.end() - blocks_[first].begin};
}

HalvingDoublingAllreduce::Halves HalvingDoublingAllreduce::Round0Halves() const {
  const int v = vrank_ >= 0 ? vrank_ : fold_.VirtualRank(fold_peer_);
  const int half = fold_.p() / 2;
  const bool upper = (v & half) != 0;
  return {Blocks(upper ? 0 : half, half), Blocks(upper ? half : 0, half)};
}

absl::Status HalvingDoublingAllreduce::RunExtraInRounds(float* data, int64_t step,
                                                        int bucket, absl::Time deadline) {
  // The half the partner gives away first, so that the partner passes it on
  // while the rest arrives; then the result.
  const Halves h = Round0Halves();
  absl::Status st =
      SendRange(transport_, fold_peer_,
                MakeTag(step, bucket, CollectivePhase::kFoldIn, 0, 0), data, h.give);
  if (st.ok()) {
    st = SendRange(transport_, fold_peer_,
                   MakeTag(step, bucket, CollectivePhase::kFoldIn, 0, 1), data, h.keep);
  }
  if (st.ok()) {
    st = ReceiveRange(transport_, fold_peer_,
                      MakeTag(step, bucket, CollectivePhase::kFoldOut, 0, 0),
                      Range{0, count_}, data, Into::kCopy, deadline);
  }
  if (!st.ok()) return st;
  return transport_->WaitSendsReleased(deadline);
}

absl::Status HalvingDoublingAllreduce::FoldInInRounds(float* data, int64_t step,
                                                      int bucket, absl::Time deadline) {
  // The extra rank's first message plus ours is our halving round-0 message.
  const Halves h = Round0Halves();
  if (h.give.size > 0) {
    absl::StatusOr<std::unique_ptr<RecvChunk>> chunk = transport_->Recv(
        fold_peer_, MakeTag(step, bucket, CollectivePhase::kFoldIn, 0, 0), h.give.size,
        deadline);
    if (!chunk.ok()) return chunk.status();
    absl::Status st = transport_->SendSum(
        HalvingPartner(0), MakeTag(step, bucket, CollectivePhase::kHalving, 0, 0),
        data + h.give.begin, **chunk, nullptr);
    if (!st.ok()) return st;
  }
  return ReceiveRange(transport_, fold_peer_,
                      MakeTag(step, bucket, CollectivePhase::kFoldIn, 0, 1), h.keep, data,
                      Into::kAdd, deadline);
}

absl::Status HalvingDoublingAllreduce::RunInRounds(float* data, int64_t step, int bucket,
                                                   absl::Time deadline) {
  if (vrank_ < 0) return RunExtraInRounds(data, step, bucket, deadline);
  const bool folded = fold_peer_ >= 0;
  absl::Status st;
  if (folded) st = FoldInInRounds(data, step, bucket, deadline);
  // Halving: this rank and its partner hold blocks [base, base + m); the one
  // whose virtual rank has the bit `half` keeps the upper half.
  int base = 0;
  for (int k = 0, m = fold_.p(); k < fold_.levels() && st.ok(); ++k, m /= 2) {
    const int half = m / 2;
    const bool upper = (vrank_ & half) != 0;
    const ChunkTag tag = MakeTag(step, bucket, CollectivePhase::kHalving, k, 0);
    if (k > 0 || !folded) {  // a folded rank sent round 0 in FoldInInRounds
      st = SendRange(transport_, HalvingPartner(k), tag, data,
                     Blocks(upper ? base : base + half, half));
    }
    if (st.ok()) {
      st = ReceiveRange(transport_, HalvingPartner(k), tag,
                        Blocks(upper ? base + half : base, half), data, Into::kAdd,
                        deadline);
    }
    if (upper) base += half;
  }
  // Doubling: in round j this rank holds the 2^j blocks of its aligned group.
  for (int j = 0; j < fold_.levels() && st.ok(); ++j) {
    const int n = 1 << j;
    const int mine = vrank_ & ~(n - 1);
    const ChunkTag tag = MakeTag(step, bucket, CollectivePhase::kDoubling, j, 0);
    st = SendRange(transport_, DoublingPartner(j), tag, data, Blocks(mine, n));
    if (st.ok()) {
      st = ReceiveRange(transport_, DoublingPartner(j), tag, Blocks(mine ^ n, n), data,
                        Into::kCopy, deadline);
    }
  }
  if (st.ok() && folded) {
    st = SendRange(transport_, fold_peer_,
                   MakeTag(step, bucket, CollectivePhase::kFoldOut, 0, 0), data,
                   Range{0, count_});
  }
  if (!st.ok()) return st;
  return transport_->WaitSendsReleased(deadline);
}

}  // namespace gradsync
