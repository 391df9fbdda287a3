// The one interface every allreduce algorithm implements, and the factory that
// picks one. Algorithms are built once per tensor size (Gloo style) and Run
// every step; all of them talk only to a Transport:
//   ring.h                RingAllreduce (ALGORITHM_RING): pipelined ring,
//                         bandwidth-optimal, 2(N-1) latencies.
//   halving_doubling.h    HalvingDoublingAllreduce (ALGORITHM_HALVING_DOUBLING):
//                         Rabenseifner, bandwidth-optimal, 2 log2(p) latencies.
//   recursive_doubling.h  RecursiveDoublingAllreduce (ALGORITHM_TREE):
//                         log2(p) full-vector exchanges, for small vectors.
//   hierarchical.h        HierarchicalAllreduce (ALGORITHM_HIERARCHICAL).
// The power-of-two ones fold extra ranks in and out (power_of_two.h).
#ifndef GRADSYNC_WORKER_COLLECTIVES_ALLREDUCE_H_
#define GRADSYNC_WORKER_COLLECTIVES_ALLREDUCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gradsync/v1/gradsync.pb.h"
#include "worker/collectives/transport.h"

namespace gradsync {

class TuningTable;

struct AllreduceOptions {
  size_t segment_bytes = 1 << 20;              // pipelining unit
  absl::Duration timeout = absl::Seconds(30);  // per Run
  // Hierarchical: the host group of each rank (size == world size); empty
  // means every rank is its own group.
  std::vector<int> groups;
  // What ALGORITHM_AUTO / UNSPECIFIED run (common/spec/tuning_table.h); not
  // owned, must outlive MakeAllreduce's call. nullptr: the built-in table.
  const TuningTable* tuning = nullptr;
};

// Sum-allreduce of a fixed number of floats. Every rank ends with
// bit-identical sums. Not thread-safe; one Run at a time.
class Allreduce {
 public:
  virtual ~Allreduce() = default;
  // Sums data[0..count) across ranks, in place. On error the contents of
  // `data` are unspecified and the transport should be aborted.
  virtual absl::Status Run(float* data, int64_t step, int bucket) = 0;
  // The algorithm that runs (never ALGORITHM_AUTO).
  virtual v1::Algorithm algorithm() const = 0;
};

// Builds `algorithm` for `count` floats over `transport`. ALGORITHM_AUTO (or
// UNSPECIFIED) runs what options.tuning (or the built-in table) chooses for
// the world size and count * 4 bytes; if this build lacks that algorithm
// (UNIMPLEMENTED) it runs the ring. The result's algorithm() says which ran.
// UNIMPLEMENTED for an explicitly named algorithm this build does not have,
// INVALID_ARGUMENT for a bad value or options (hierarchical: bad groups).
absl::StatusOr<std::unique_ptr<Allreduce>> MakeAllreduce(
    v1::Algorithm algorithm, Transport* transport, size_t count,
    const AllreduceOptions& options);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_ALLREDUCE_H_
