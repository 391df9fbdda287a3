#include "worker/collectives/halving_doubling.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>

namespace gradsync {
namespace {

void Append(std::vector<Range>* out, const std::vector<Range>& more) {
  out->insert(out->end(), more.begin(), more.end());
}

}  // namespace

HalvingDoublingAllreduce::HalvingDoublingAllreduce(Transport* transport,
                                                   size_t count,
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
  for (const Range& block : blocks_) {
    block_segs_.push_back(Segments(block, seg));
  }
  in_rounds_ = count_ * sizeof(float) <= kHdRoundBytes && count_ <= seg;
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
    onward_.push_back(
        k + 1 < levels ? HalvingOrder(k + 1, v ^ (p >> (k + 2))).size() : 0);
    doubling_recv_.push_back(DoublingOrder(v ^ (1 << k), k));
    forward_offset_.push_back(offset);
    offset += doubling_recv_.back().size();
  }
}

std::vector<Range> HalvingDoublingAllreduce::BlockSegs(int first,
                                                       int n) const {
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

std::vector<Range> HalvingDoublingAllreduce::DoublingOrder(int w,
                                                           int j) const {
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

absl::Status HalvingDoublingAllreduce::Run(float* data, int64_t step,
                                           int bucket) {
  if (transport_->size() == 1 || count_ == 0) return absl::OkStatus();
  transport_->BeginCollective(count_ * sizeof(float));
  const absl::Time deadline = absl::Now() + options_.timeout;
  if (in_rounds_) return RunInRounds(data, step, bucket, deadline);
  if (vrank_ < 0) return RunExtra(data, step, bucket, deadline);
  const bool folded = fold_peer_ >= 0;
  absl::Status st;
  // 1.
  if (folded) st = FoldIn(data, step, bucket, deadline);
  // 2.
  for (int k = 0; k < fold_.levels() && st.ok(); ++k) {
    st = HalvingRound(k, /*send_round0=*/k == 0 && !folded, data, step,
                      bucket, deadline);
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

absl::Status HalvingDoublingAllreduce::FoldIn(float* data, int64_t step,
                                              int bucket,
                                              absl::Time deadline) {
  const size_t given_away = round0_send_.size();
  ChunkTag out = MakeTag(step, bucket, RingPhase::kHalving, 0, 0);
  return ReceiveEach(
      transport_, fold_peer_, MakeTag(step, bucket, RingPhase::kFoldIn, 0, 0),
      fold_in_, deadline,
      [&](size_t t, const Range& seg, const RecvChunk& chunk) {
        float* d = data + seg.begin;
        if (t >= given_away) {
          chunk.AddTo(d);
          return absl::OkStatus();
        }
        out.segment = static_cast<int32_t>(t);
        return transport_->SendSum(HalvingPartner(0), out, d, chunk, nullptr);
      });
}

absl::Status HalvingDoublingAllreduce::HalvingRound(int k, bool send_round0,
                                                    float* data, int64_t step,
                                                    int bucket,
                                                    absl::Time deadline) {
  const bool last = k + 1 == fold_.levels();
  const int next = last ? DoublingPartner(0) : HalvingPartner(k + 1);
  const ChunkTag next_tag =
      last ? MakeTag(step, bucket, RingPhase::kDoubling, 0, 0)
           : MakeTag(step, bucket, RingPhase::kHalving, k + 1, 0);
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
  const ChunkTag tag = MakeTag(step, bucket, RingPhase::kHalving, k, 0);
  if (!send_round0) {
    return ReceiveEach(transport_, HalvingPartner(k), tag, halving_recv_[k],
                       deadline, on_received);
  }
  // With L = 1 the partner of round 0 is also the doubling round-0 partner
  // that on_received sends to: all halving segments must precede those.
  const size_t ahead =
      fold_.levels() == 1 ? round0_send_.size() : kSendAhead;
  size_t sent = 0;
  auto send_ahead = [&](size_t t) {
    const size_t to = std::min(round0_send_.size(), t + ahead);
    absl::Status st = SendSegments(transport_, HalvingPartner(0), tag, data,
                                   round0_send_, sent, to);
    sent = to;
    return st;
  };
  absl::Status st = ReceiveEach(transport_, HalvingPartner(0), tag,
                                halving_recv_[0], deadline, on_received,
                                send_ahead);
  if (!st.ok()) return st;
  return SendSegments(transport_, HalvingPartner(0), tag, data, round0_send_,
                      sent, round0_send_.size());
}

absl::Status HalvingDoublingAllreduce::SendOwnBlock(float* data,
                                                    int64_t step, int bucket) {
  const std::vector<Range>& own = block_segs_[vrank_];
  // Round 0's partner got it from the last halving round.
  for (int j = 1; j < fold_.levels(); ++j) {
    absl::Status st = SendSegments(
        transport_, DoublingPartner(j),
        MakeTag(step, bucket, RingPhase::kDoubling, j, 0), data, own, 0,
        own.size());
    if (!st.ok()) return st;
  }
  if (fold_peer_ < 0) return absl::OkStatus();
  return SendSegments(transport_, fold_peer_,
                      MakeTag(step, bucket, RingPhase::kFoldOut, 0, 0), data,
                      own, 0, own.size());
}

absl::Status HalvingDoublingAllreduce::DoublingRound(int j, float* data,
                                                     int64_t step, int bucket,
                                                     absl::Time deadline) {
  const size_t offset = forward_offset_[j];
  return ReceiveEach(
      transport_, DoublingPartner(j),
      MakeTag(step, bucket, RingPhase::kDoubling, j, 0), doubling_recv_[j],
      deadline, [&](size_t t, const Range& seg, const RecvChunk& chunk) {
        chunk.CopyTo(data + seg.begin);
        for (int i = j + 1; i < fold_.levels(); ++i) {
          absl::Status st = transport_->Forward(
              DoublingPartner(i),
              MakeTag(step, bucket, RingPhase::kDoubling, i, offset + t),
              chunk);
          if (!st.ok()) return st;
        }
        if (fold_peer_ < 0) return absl::OkStatus();
        return transport_->Forward(
            fold_peer_,
            MakeTag(step, bucket, RingPhase::kFoldOut, 0, offset + t), chunk);
      });
}

absl::Status HalvingDoublingAllreduce::RunExtra(float* data, int64_t step,
                                                int bucket,
                                                absl::Time deadline) {
  return RunExtraRank(transport_, fold_peer_, data, step, bucket, fold_in_,
                      fold_out_, deadline);
}

Range HalvingDoublingAllreduce::Blocks(int first, int n) const {
  if (n <= 0) return Range{blocks_[first].begin, 0};
  const Range& last = blocks_[first + n - 1];
  return Range{blocks_[first].begin, last.end() - blocks_[first].begin};
}

absl::Status HalvingDoublingAllreduce::RunInRounds(float* data, int64_t step,
                                                   int bucket,
                                                   absl::Time deadline) {
  auto tag = [&](RingPhase phase, int index, size_t segment) {
    return MakeTag(step, bucket, phase, index, segment);
  };
  auto send = [&](int peer, const ChunkTag& t, const Range& r) {
    if (r.size == 0) return absl::OkStatus();
    return transport_->Send(peer, t, data + r.begin, r.size);
  };
  // Hands the message to `use`; an empty range is no message.
  auto receive = [&](int peer, const ChunkTag& t, const Range& r,
                     const std::function<absl::Status(const RecvChunk&)>& use) {
    if (r.size == 0) return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<RecvChunk>> chunk =
        transport_->Recv(peer, t, r.size, deadline);
    if (!chunk.ok()) return chunk.status();
    return use(**chunk);
  };
  auto add = [&](const Range& r) {
    return [&data, r](const RecvChunk& c) {
      c.AddTo(data + r.begin);
      return absl::OkStatus();
    };
  };
  // Halving round 0 of virtual rank v: the half of all blocks it gives away
  // and the half it keeps.
  const int v = vrank_ >= 0 ? vrank_ : fold_.VirtualRank(fold_peer_);
  const int half0 = fold_.p() / 2;
  const bool upper0 = (v & half0) != 0;
  const Range give0 = Blocks(upper0 ? 0 : half0, half0);
  const Range keep0 = Blocks(upper0 ? half0 : 0, half0);
  const Range all{0, count_};
  absl::Status st;
  if (vrank_ < 0) {
    // The extra rank: the half its partner gives away first, so that the
    // partner passes it on while the rest arrives; then the result.
    st = send(fold_peer_, tag(RingPhase::kFoldIn, 0, 0), give0);
    if (st.ok()) st = send(fold_peer_, tag(RingPhase::kFoldIn, 0, 1), keep0);
    if (st.ok()) {
      st = receive(fold_peer_, tag(RingPhase::kFoldOut, 0, 0), all,
                   [&data](const RecvChunk& c) {
                     c.CopyTo(data);
                     return absl::OkStatus();
                   });
    }
    if (!st.ok()) return st;
    return transport_->WaitSendsReleased(deadline);
  }
  // Halving: this rank and its partner hold blocks [base, base + m); the one
  // whose virtual rank has the bit `half` keeps the upper half. A folded
  // rank's round-0 message is its extra rank's first one plus its own.
  const bool folded = fold_peer_ >= 0;
  if (folded) {
    st = receive(fold_peer_, tag(RingPhase::kFoldIn, 0, 0), give0,
                 [&](const RecvChunk& c) {
                   return transport_->SendSum(HalvingPartner(0),
                                              tag(RingPhase::kHalving, 0, 0),
                                              data + give0.begin, c, nullptr);
                 });
    if (st.ok()) {
      st = receive(fold_peer_, tag(RingPhase::kFoldIn, 0, 1), keep0,
                   add(keep0));
    }
  }
  int base = 0;
  for (int k = 0, m = fold_.p(); k < fold_.levels() && st.ok(); ++k, m /= 2) {
    const int half = m / 2;
    const bool upper = (vrank_ & half) != 0;
    const Range keep = Blocks(upper ? base + half : base, half);
    const Range give = Blocks(upper ? base : base + half, half);
    const ChunkTag t = tag(RingPhase::kHalving, k, 0);
    if (k > 0 || !folded) st = send(HalvingPartner(k), t, give);
    if (st.ok()) st = receive(HalvingPartner(k), t, keep, add(keep));
    if (upper) base += half;
  }
  // Doubling: in round j this rank holds the 2^j blocks of its aligned group.
  for (int j = 0; j < fold_.levels() && st.ok(); ++j) {
    const int n = 1 << j;
    const int mine = vrank_ & ~(n - 1);
    const Range theirs = Blocks(mine ^ n, n);
    const ChunkTag t = tag(RingPhase::kDoubling, j, 0);
    st = send(DoublingPartner(j), t, Blocks(mine, n));
    if (st.ok()) {
      st = receive(DoublingPartner(j), t, theirs,
                   [&data, theirs](const RecvChunk& c) {
                     c.CopyTo(data + theirs.begin);
                     return absl::OkStatus();
                   });
    }
  }
  if (st.ok() && folded) {
    st = send(fold_peer_, tag(RingPhase::kFoldOut, 0, 0), all);
  }
  if (!st.ok()) return st;
  return transport_->WaitSendsReleased(deadline);
}

}  // namespace gradsync
