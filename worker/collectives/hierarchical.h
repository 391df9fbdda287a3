// Hierarchical (two-level) allreduce: reduce inside each host group, ring
// allreduce among the group leaders, broadcast inside each group. Cross-host
// traffic is one ring among L leaders instead of one among all N ranks.
#ifndef GRADSYNC_WORKER_COLLECTIVES_HIERARCHICAL_H_
#define GRADSYNC_WORKER_COLLECTIVES_HIERARCHICAL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/partition.h"
#include "worker/collectives/allreduce.h"
#include "worker/collectives/ring.h"
#include "worker/collectives/sub_transport.h"
#include "worker/collectives/transport.h"

namespace gradsync {

// The host groups of a world, from a group id per rank.
struct HostGroups {
  // INVALID_ARGUMENT naming "groups" unless groups.size() == world and every
  // id is >= 0. Empty `groups`: every rank is its own group.
  static absl::StatusOr<HostGroups> Make(const std::vector<int>& groups, int world);

  // The ranks of each group in ascending order; groups are ordered by their
  // leader (lowest rank), so members[g][0] is group g's leader.
  std::vector<std::vector<int>> members;
  std::vector<int> group_of;  // group index (into members) per rank

  std::vector<int> Leaders() const;
};

// A group id per rank from the ranks' peer addresses "HOST:PORT" (by rank):
// ranks with equal HOST share a group; ids number the hosts in order of first
// appearance. The port is what follows the last ':' ("[::1]:7000" has host
// "[::1]"); an address without ':' is all host.
std::vector<int> GroupsByHost(const std::vector<std::string>& addresses);

// Sum-allreduce of `count` floats over host groups. Every rank ends with
// bit-identical sums. Not thread-safe; one Run at a time.
//
// Why bit-identical: every element's final value is computed once, on one
// path, in one fixed order, and only copied afterwards. Inside a group the
// partial sum is built along the chain tail -> leader, always as
// d[m0] + (d[m1] + (... + d[m(g-1)])); the ring among leaders sums each chunk
// in its fixed ring order and copies the final value to every leader
// (RingAllreduce's own guarantee); the group broadcast copies the leader's
// bytes. No rank ever re-adds in another order, so no rank can round
// differently.
class HierarchicalAllreduce final : public Allreduce {
 public:
  // Builds the object for `transport`'s rank (options.groups as HostGroups;
  // segment_bytes and timeout as for the ring). INVALID_ARGUMENT for bad
  // groups. `transport` must outlive the result.
  static absl::StatusOr<std::unique_ptr<HierarchicalAllreduce>> Create(
      Transport* transport, size_t count, const AllreduceOptions& options);

  // Sums data[0..count) across all ranks, in place. On error the contents of
  // `data` are unspecified and the transport should be aborted.
  //
  // Protocol for the rank at position p of its group m0 < m1 < ... < m(g-1)
  // (m0 the leader), the vector cut into segments s = 0..S-1:
  //  1. Group reduce, a segment-pipelined chain towards the leader. For each
  //     s: the tail m(g-1) sends its segment as (kGroupReduce, index g-1);
  //     a middle member receives (kGroupReduce, index p+1) from m(p+1) and
  //     sends its data + it (Transport::SendSum, nothing stored) as
  //     (kGroupReduce, index p) to m(p-1); the leader receives index 1 and
  //     adds it into data (own + received, the same order).
  //  2. Leaders only: RingAllreduce of data among the L leaders (a
  //     SubTransport that numbers them 0..L-1 by ascending rank); tags
  //     kReduceScatter / kAllgather as the ring's.
  //  3. Group broadcast, a chain away from the leader. For each s: the leader
  //     sends its segment as (kGroupBroadcast, index 0) to m1; member p
  //     receives (kGroupBroadcast, index p-1) from m(p-1), copies it into
  //     data and forwards the received bytes as (kGroupBroadcast, index p)
  //     to m(p+1) if it has one.
  //  4. Wait until the transport released our memory.
  // Every pair of ranks carries traffic in one direction per phase and each
  // receiver takes a source's segments in the order it sent them (the
  // transport's FIFO per (source, lane) holds). The chain's first sender (the
  // tail in 1, the leader in 3) queues its whole vector at once, as
  // RingBroadcast's root does: sends copy and never block, so that costs
  // count * 4 bytes of send queue, not a deadlock. Each phase waits at most
  // options.timeout (the leader ring's deadline starts with the ring).
  //
  // Cost (g ranks in the largest group, L leaders, K bytes, alpha-beta as in
  // the design document): about 2(g-1)·alpha + 2·K/B inside the groups (the
  // chains are pipelined by segment) plus the ring among leaders,
  // 2(L-1)·alpha + 2(L-1)/L·K/B, on the inter-host links only.
  absl::Status Run(float* data, int64_t step, int bucket) override;
  AllreduceAlgorithm algorithm() const override {
    return AllreduceAlgorithm::kHierarchical;
  }

 private:
  HierarchicalAllreduce(Transport* transport, size_t count,
                        const AllreduceOptions& options, std::vector<int> members,
                        int position);
  // Steps 1 and 3 of Run.
  absl::Status ReduceToLeader(float* data, int64_t step, int bucket, absl::Time deadline);
  absl::Status BroadcastFromLeader(float* data, int64_t step, int bucket,
                                   absl::Time deadline);

  // Constant after construction.
  Transport* const transport_;
  const size_t count_;
  const absl::Duration timeout_;
  const Env* const env_;            // not owned
  const std::vector<int> members_;  // this rank's group, ascending
  const int position_;              // index of this rank in members_
  const std::vector<Range> segments_;
  // Leaders only (null elsewhere): the leaders' sub-transport and their ring.
  std::unique_ptr<SubTransport> leaders_;
  std::unique_ptr<RingAllreduce> ring_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_HIERARCHICAL_H_
