#include "worker/collectives/ring.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/kernels.h"

namespace gradsync {

RingAllreduce::RingAllreduce(Transport* transport, size_t count, RingOptions options)
    : transport_(transport), count_(count), options_(options) {
  const int n = transport_->size();
  for (const Range& chunk : PartitionEven(count_, n)) {
    segments_.push_back(Segments(chunk, SegmentElems(options_.segment_bytes)));
  }
}

size_t RingAllreduce::Chunk(int c) const {
  const int n = transport_->size();
  return static_cast<size_t>(((c % n) + n) % n);
}

absl::Status RingAllreduce::Run(float* data, int64_t step, int bucket) {
  const int n = transport_->size();
  const int r = transport_->rank();
  if (n == 1 || count_ == 0) return absl::OkStatus();
  transport_->BeginCollective(count_ * sizeof(float));
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  const absl::Time deadline = options_.env->Now() + options_.timeout;
  auto tag = [&](CollectivePhase phase, int index, size_t segment) {
    return MakeTag(step, bucket, phase, index, segment);
  };
  // 1.
  absl::Status st;
  const auto& own = segments_[Chunk(r)];
  for (size_t j = 0; j < own.size(); ++j) {
    st = transport_->Send(right, tag(CollectivePhase::kReduceScatter, 0, j),
                          data + own[j].begin, own[j].size);
    if (!st.ok()) return st;
  }
  // 2.
  for (int k = 0; k <= n - 2; ++k) {
    const auto& segs = segments_[Chunk(r - k - 1)];
    for (size_t j = 0; j < segs.size(); ++j) {
      float* dst = data + segs[j].begin;
      auto chunk = transport_->Recv(left, tag(CollectivePhase::kReduceScatter, k, j),
                                    segs[j].size, deadline);
      if (!chunk.ok()) return chunk.status();
      // Partial sums are only forwarded; the last one is also kept.
      const bool last = k == n - 2;
      const ChunkTag next = last ? tag(CollectivePhase::kAllgather, 0, j)
                                 : tag(CollectivePhase::kReduceScatter, k + 1, j);
      st = transport_->SendSum(right, next, dst, **chunk, last ? dst : nullptr);
      if (!st.ok()) return st;
    }
  }
  // 3.
  for (int k = 0; k <= n - 2; ++k) {
    const auto& segs = segments_[Chunk(r - k)];
    for (size_t j = 0; j < segs.size(); ++j) {
      float* dst = data + segs[j].begin;
      auto chunk = transport_->Recv(left, tag(CollectivePhase::kAllgather, k, j),
                                    segs[j].size, deadline);
      if (!chunk.ok()) return chunk.status();
      (*chunk)->CopyTo(dst);
      if (k < n - 2) {
        st = transport_->Forward(right, tag(CollectivePhase::kAllgather, k + 1, j),
                                 **chunk);
        if (!st.ok()) return st;
      }
    }
  }
  // 4.
  return transport_->WaitSendsReleased(deadline);
}

absl::Status RingBroadcast(Transport* transport, float* data, size_t count, int root,
                           size_t segment_bytes, absl::Time deadline) {
  const int n = transport->size();
  const int r = transport->rank();
  if (n == 1 || count == 0) return absl::OkStatus();
  transport->BeginCollective(count * sizeof(float));
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  // The root checks what receivers get: its values as the wire carries them.
  if (r == root) RoundToWire(transport->wire_dtype(), data, count);
  const uint64_t sum = r == root ? Checksum(data, count) : 0;
  std::vector<Range> segs = Segments(Range{0, count}, SegmentElems(segment_bytes));
  uint64_t root_sum = 0;
  for (size_t j = 0; j < segs.size(); ++j) {
    ChunkTag t;
    t.phase = CollectivePhase::kBroadcast;
    t.segment = static_cast<int32_t>(j);
    float* dst = data + segs[j].begin;
    std::unique_ptr<RecvChunk> received;
    if (r != root) {
      auto chunk = transport->Recv(left, t, segs[j].size, deadline);
      if (!chunk.ok()) return chunk.status();
      received = std::move(*chunk);
      received->CopyTo(dst);
      if (j + 1 == segs.size()) root_sum = received->checksum();
    }
    if (right != root) {
      const uint64_t check = j + 1 == segs.size() ? (r == root ? sum : root_sum) : 0;
      absl::Status st = r == root ? transport->Send(right, t, dst, segs[j].size, check)
                                  : transport->Forward(right, t, *received, check);
      if (!st.ok()) return st;
    }
  }
  if (r != root && Checksum(data, count) != root_sum) {
    return absl::DataLossError(
        absl::StrCat("broadcast from rank ", root, " arrived corrupted at rank ", r));
  }
  return transport->WaitSendsReleased(deadline);
}

}  // namespace gradsync
