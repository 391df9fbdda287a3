// Rabenseifner's allreduce: reduce-scatter by recursive halving, allgather by
// recursive doubling (kHalvingDoubling).
#ifndef GRADSYNC_WORKER_COLLECTIVES_HALVING_DOUBLING_H_
#define GRADSYNC_WORKER_COLLECTIVES_HALVING_DOUBLING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/partition.h"
#include "worker/collectives/allreduce.h"
#include "worker/collectives/power_of_two.h"
#include "worker/collectives/transport.h"

namespace gradsync {

// Sum-allreduce of `count` floats: 2·log2(p) rounds (p = largest power of
// two <= N) moving 2K(p-1)/p bytes per rank, as the ring does, with log2(p)
// latencies per phase instead of N-1. Built once, Run every step. Not
// thread-safe; one Run at a time.
//
// The vector is cut into p blocks (PartitionEven); virtual rank v ends the
// halving owning block v, summed. Messages are segments of at most
// AllreduceOptions::segment_bytes that never span two blocks (so a rank
// sends at least one message per block it sends: p-1 per phase). Each
// message stream is ordered so that what the receiver passes on in its next
// round arrives first, and a rank passes a segment on as soon as it arrives:
// consecutive rounds overlap.
//
// A small vector (at most kHdRoundBytes, and one segment) goes round by
// round instead (RunInRounds): one message per round, the blocks a rank
// sends in a round being contiguous, so 2·log2(p) messages per rank (plus
// the fold's) instead of 2(p-1): at 4 KiB and p = 8 the overlap saves
// nothing and every message costs a send and a wake-up.
//
// Bit-identical results: every partial and final sum of an element is
// computed by exactly one rank (the fold partner, then the rank that keeps
// that half in each halving round; the final one by the block's owner) and
// then only copied (Forward / CopyTo / the same value SendSum stores and
// sends; in rounds, the owner's block as Send rounds it in place), so all
// ranks hold the owner's bits.
inline constexpr size_t kHdRoundBytes = 64 << 10;

class HalvingDoublingAllreduce final : public Allreduce {
 public:
  HalvingDoublingAllreduce(Transport* transport, size_t count,
                           AllreduceOptions options = {});

  // Sums data[0..count) across ranks, in place. On error the contents of
  // `data` are unspecified and the transport should be aborted.
  //
  // Protocol for virtual rank v of p (PowerOfTwoFold), L = log2 p. Halving
  // round k pairs v with v ^ (p >> (k+1)); the lower one keeps the lower
  // half of the blocks both hold, the other the upper half. Doubling round j
  // pairs v with v ^ 2^j. Segment t of a message is tagged with segment t.
  //  1. Fold-in, if an extra rank is folded into us: receive its vector
  //     (kFoldIn, 0), first the half we send in halving round 0: each
  //     segment is summed with ours straight into a frame for the round-0
  //     partner (Transport::SendSum, kHalving 0), then the half we keep,
  //     added into data. Otherwise send the half we give away to the
  //     round-0 partner (kHalving, 0), kSendAhead segments ahead of the
  //     receives of step 2 (all at once when L = 1).
  //  2. For k = 0..L-1: receive the half we keep from the round-k partner
  //     (kHalving, k), first the part we give away in round k+1: data + it
  //     goes straight into a frame for the round-(k+1) partner
  //     (kHalving, k+1); the rest is added into data. In round L-1 all of
  //     it is our block, final: SendSum stores it into data and sends it to
  //     the doubling round-0 partner (kDoubling, 0). Partial sums given away
  //     are never written to data.
  //  3. Send our block to the doubling partners of rounds 1..L-1
  //     (kDoubling, j) and to the folded extra rank, if any (kFoldOut, 0).
  //  4. For j = 0..L-1: receive the partner's blocks (kDoubling, j), copy
  //     them into data, and forward each segment as it arrives
  //     (Transport::Forward, no copy) to the partners of rounds j+1..L-1 and
  //     to the folded extra rank. A round-j message is thus: the sender's
  //     block, then what it received in rounds 0..j-1, in arrival order.
  //  5. Wait until the transport released our memory.
  // An extra rank sends its vector to its partner in the order of step 1
  // (kFoldIn, 0), then receives the result (kFoldOut, 0) into data.
  //
  // In rounds (a small vector): the same rounds, partners and tags, each
  // message the whole range of blocks given or received in that round
  // (none when that range is empty), segment 0: halving round k sends the
  // half given away and adds the half kept; doubling round j sends the 2^j
  // blocks held (Send rounds them in place to the wire dtype) and copies
  // the partner's; then the whole vector to a folded extra rank
  // (kFoldOut). An extra rank sends its vector in two messages (kFoldIn,
  // segments 0 and 1): the half its partner gives away in halving round 0,
  // which the partner sums straight into its round-0 message (SendSum), so
  // that it is on its way while the rest arrives; then the half it keeps.
  // The same sums in the same order, so the same bits as the segment-wise
  // protocol.
  absl::Status Run(float* data, int64_t step, int bucket) override;
  AllreduceAlgorithm algorithm() const override {
    return AllreduceAlgorithm::kHalvingDoubling;
  }

 private:
  // Segments of blocks [first, first + n), in address order.
  std::vector<Range> BlockSegs(int first, int n) const;
  // Order of the message that virtual rank u receives in halving round k.
  std::vector<Range> HalvingOrder(int k, int u) const;
  // Order of the message that virtual rank w sends in doubling round j
  // (j = L: what it sends its folded extra rank).
  std::vector<Range> DoublingOrder(int w, int j) const;
  // Order of the fold-in message to virtual rank u.
  std::vector<Range> FoldInOrder(int u) const;
  int HalvingPartner(int k) const;   // real rank
  int DoublingPartner(int j) const;  // real rank

  absl::Status FoldIn(float* data, int64_t step, int bucket, absl::Time deadline);
  absl::Status HalvingRound(int k, bool send_round0, float* data, int64_t step,
                            int bucket, absl::Time deadline);
  absl::Status SendOwnBlock(float* data, int64_t step, int bucket);
  absl::Status DoublingRound(int j, float* data, int64_t step, int bucket,
                             absl::Time deadline);
  absl::Status RunExtra(float* data, int64_t step, int bucket, absl::Time deadline);
  absl::Status RunInRounds(float* data, int64_t step, int bucket, absl::Time deadline);
  absl::Status RunExtraInRounds(float* data, int64_t step, int bucket,
                                absl::Time deadline);
  absl::Status FoldInInRounds(float* data, int64_t step, int bucket, absl::Time deadline);
  // The elements of blocks [first, first + n).
  Range Blocks(int first, int n) const;
  // Halving round 0 of this rank's virtual rank (its fold partner's, for an
  // extra rank): the blocks given away and the blocks kept, in rounds.
  struct Halves {
    Range give;
    Range keep;
  };
  Halves Round0Halves() const;

  // Constant after construction.
  Transport* const transport_;
  const size_t count_;
  const AllreduceOptions options_;
  const PowerOfTwoFold fold_;
  const int rank_;
  const int vrank_;            // -1 for an extra rank
  const int fold_peer_;        // -1 when not in a fold pair
  std::vector<Range> blocks_;  // by block (= virtual rank)
  bool in_rounds_ = false;     // RunInRounds
  // The segment-wise protocol's, all of the below (empty when in_rounds_):
  std::vector<std::vector<Range>> block_segs_;  // by block (= virtual rank)
  // Virtual ranks only, by round:
  std::vector<Range> round0_send_;
  std::vector<std::vector<Range>> halving_recv_;
  std::vector<size_t> onward_;  // leading halving_recv_[k] sent in round k+1
  std::vector<std::vector<Range>> doubling_recv_;
  std::vector<size_t> forward_offset_;  // first segment index of a forward
  // Fold pairs: the messages between the extra rank and its partner.
  std::vector<Range> fold_in_;
  std::vector<Range> fold_out_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_HALVING_DOUBLING_H_
