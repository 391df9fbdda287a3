// What the power-of-two algorithms (halving_doubling.h, recursive_doubling.h)
// share: the fold of a world of any size onto a power-of-two group, tags, and
// the segment-wise receive loop.
#ifndef GRADSYNC_WORKER_COLLECTIVES_POWER_OF_TWO_H_
#define GRADSYNC_WORKER_COLLECTIVES_POWER_OF_TWO_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/partition.h"
#include "worker/collectives/transport.h"

namespace gradsync {

// A world of `size` ranks seen as p = the largest power of two <= size
// "virtual" ranks plus r = size - p extra ranks. Ranks 2i and 2i+1 (i < r)
// form a fold pair: 2i+1 is extra (it folds its vector into 2i before the
// algorithm and gets the result back after it); 2i is virtual rank i. Rank
// q >= 2r is virtual rank q - r. Plain value; thread-compatible.
class PowerOfTwoFold {
 public:
  explicit PowerOfTwoFold(int size);

  int p() const { return p_; }
  int levels() const { return levels_; }  // log2(p)
  // -1 for an extra rank.
  int VirtualRank(int rank) const;
  int RealRank(int vrank) const;
  // The other rank of `rank`'s fold pair, or -1 if it has none.
  int FoldPeer(int rank) const;
  bool IsExtra(int rank) const { return VirtualRank(rank) < 0; }

 private:
  int p_ = 1;
  int levels_ = 0;
  int extra_ = 0;
};

// Called for the t-th received piece, whose elements are `seg` of the vector.
using OnReceived =
    std::function<absl::Status(size_t t, const Range& seg, const RecvChunk&)>;

// Receives segs.size() messages from `peer` in order, the t-th tagged `tag`
// with segment t and holding segs[t].size floats, and hands each to
// `on_received`. If `send_ahead` is set it is called with t before the t-th
// receive (the caller sends what must be on the wire by then). Stops at the
// first error (from Recv, FAILED_PRECONDITION for a stray message, or from a
// callback). Blocks until `deadline` at most per receive.
absl::Status ReceiveEach(Transport* transport, int peer, ChunkTag tag,
                         const std::vector<Range>& segs, absl::Time deadline,
                         const OnReceived& on_received,
                         const std::function<absl::Status(size_t)>& send_ahead = nullptr);

// Sends data[segs[t]] to `peer` under `tag` with segment t, for t in
// [from, to) (to clamped to segs.size()). Send copies; never blocks.
absl::Status SendSegments(Transport* transport, int peer, ChunkTag tag, float* data,
                          const std::vector<Range>& segs, size_t from, size_t to);

// The whole part of an extra rank (PowerOfTwoFold::IsExtra) in either
// algorithm: sends data[fold_in segments] to `fold_peer` (kFoldIn), receives
// the result into data[fold_out segments] (kFoldOut), then waits until the
// transport released its sends. Errors as ReceiveEach's.
absl::Status RunExtraRank(Transport* transport, int fold_peer, float* data, int64_t step,
                          int bucket, const std::vector<Range>& fold_in,
                          const std::vector<Range>& fold_out, absl::Time deadline);

// How many segments a rank sends ahead of what it has received when it
// exchanges data it already holds with a partner: bounds the bytes queued
// for sending (kSendAhead segments) while keeping the link busy. Any value
// >= 1 is deadlock-free: each side has sent segment t before it waits for
// the partner's segment t.
inline constexpr size_t kSendAhead = 4;

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_POWER_OF_TWO_H_
