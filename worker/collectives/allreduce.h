// The one interface every allreduce algorithm implements, and its options.
// Algorithms are built once per tensor size (Gloo style) and Run every step;
// all of them talk only to a Transport:
//   ring.h                RingAllreduce (kRing): pipelined ring,
//                         bandwidth-optimal, 2(N-1) latencies.
//   halving_doubling.h    HalvingDoublingAllreduce (kHalvingDoubling):
//                         Rabenseifner, bandwidth-optimal, 2 log2(p) latencies.
//   recursive_doubling.h  RecursiveDoublingAllreduce (kRecursiveDoubling,
//                         "tree" on the command line): log2(p) full-vector
//                         exchanges, for small vectors.
//   hierarchical.h        HierarchicalAllreduce (kHierarchical).
// The power-of-two ones fold extra ranks in and out (power_of_two.h).
// allreduce_factory.h builds one by name.
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
#include "common/env.h"
#include "common/spec/allreduce_algorithm.h"
#include "worker/collectives/transport.h"

namespace gradsync {

class TuningTable;

struct AllreduceOptions {
  size_t segment_bytes = 1 << 20;              // pipelining unit
  absl::Duration timeout = absl::Seconds(30);  // per Run
  // Hierarchical: the host group of each rank (size == world size); empty
  // means every rank is its own group.
  std::vector<int> groups;
  // What kAuto runs (common/spec/tuning_table.h); not
  // owned, must outlive MakeAllreduce's call. nullptr: the built-in table.
  const TuningTable* tuning = nullptr;
  // Where Run's deadline comes from (not owned, outlives the algorithm).
  const Env* env = Env::Default();
};

// Sum-allreduce of a fixed number of floats. Every rank ends with
// bit-identical sums. Not thread-safe; one Run at a time.
class Allreduce {
 public:
  virtual ~Allreduce() = default;
  // Sums data[0..count) across ranks, in place. On error the contents of
  // `data` are unspecified and the transport should be aborted.
  virtual absl::Status Run(float* data, int64_t step, int bucket) = 0;
  // The algorithm that runs (never kAuto).
  virtual AllreduceAlgorithm algorithm() const = 0;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_ALLREDUCE_H_
