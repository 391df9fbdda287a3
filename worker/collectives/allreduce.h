// The one interface every allreduce algorithm implements, and the factory that
// picks one. Algorithms are built once per tensor size (Gloo style) and Run
// every step; all of them talk only to a Transport.
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

struct AllreduceOptions {
  size_t segment_bytes = 1 << 20;              // pipelining unit
  absl::Duration timeout = absl::Seconds(30);  // per Run
  // Hierarchical: the host group of each rank (size == world size); empty
  // means every rank is its own group.
  std::vector<int> groups;
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

// Builds `algorithm` for `count` floats over `transport`; ALGORITHM_AUTO (or
// UNSPECIFIED) picks by count and world size. UNIMPLEMENTED for an algorithm
// this build does not have, INVALID_ARGUMENT for a bad value or options.
absl::StatusOr<std::unique_ptr<Allreduce>> MakeAllreduce(
    v1::Algorithm algorithm, Transport* transport, size_t count,
    const AllreduceOptions& options);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_ALLREDUCE_H_
