// A Transport over a subset of another transport's ranks, renumbered 0..L-1:
// lets an algorithm written for a whole world (the ring) run among, e.g., the
// group leaders of a hierarchical allreduce.
#ifndef GRADSYNC_WORKER_COLLECTIVES_SUB_TRANSPORT_H_
#define GRADSYNC_WORKER_COLLECTIVES_SUB_TRANSPORT_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/collectives/transport.h"

namespace gradsync {

// Sub-rank i is global rank ranks[i] of `base`. Every call is forwarded to
// `base` with the peer translated; tags, ordering, deadlines and errors are
// base's (messages from a global rank share base's FIFO per (source, lane)
// with whatever else the caller receives from that rank, so the caller keeps
// the usual rule: receive from a source in the order it sent).
//
// Ownership: does not own `base`, which must outlive it. Abort() aborts
// `base` itself (the whole job's transport), as a failed collective must
// release every rank blocked on it, not only those in the subset.
// Threading: as Transport (forwards to base's rules).
class SubTransport final : public Transport {
 public:
  // INVALID_ARGUMENT unless `ranks` is non-empty, strictly increasing, within
  // [0, base->size()) and contains base->rank().
  static absl::StatusOr<std::unique_ptr<SubTransport>> Create(Transport* base,
                                                              std::vector<int> ranks);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  // The global rank of sub-rank `sub` (0 <= sub < size()).
  int GlobalRank(int sub) const { return ranks_[sub]; }

  // As Transport; INVALID_ARGUMENT for a peer outside [0, size()).
  WireDtype wire_dtype() const override { return base_->wire_dtype(); }
  absl::Status Send(int peer, const ChunkTag& tag, float* data, size_t n,
                    uint64_t checksum = 0) override;
  absl::Status SendSum(int peer, const ChunkTag& tag, const float* a,
                       const RecvChunk& chunk, float* store) override;
  absl::Status Forward(int peer, const ChunkTag& tag, const RecvChunk& chunk,
                       uint64_t checksum = 0) override;
  absl::StatusOr<std::unique_ptr<RecvChunk>> Recv(int peer, const ChunkTag& expected,
                                                  size_t n, absl::Time deadline) override;
  absl::Status WaitSendsReleased(absl::Time deadline) override;
  void Abort(const absl::Status& status) override;
  void BeginCollective(size_t bytes) override { base_->BeginCollective(bytes); }

 private:
  SubTransport(Transport* base, std::vector<int> ranks, int rank);
  // The global rank of `peer`, or INVALID_ARGUMENT.
  absl::StatusOr<int> Global(int peer) const;

  // Constant after construction.
  Transport* const base_;
  const std::vector<int> ranks_;
  const int rank_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_SUB_TRANSPORT_H_
