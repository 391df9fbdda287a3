// Builds an allreduce algorithm by name: the one place that knows every
// implementation (so allreduce.h, which they implement, knows none).
#ifndef GRADSYNC_WORKER_COLLECTIVES_ALLREDUCE_FACTORY_H_
#define GRADSYNC_WORKER_COLLECTIVES_ALLREDUCE_FACTORY_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "common/spec/allreduce_algorithm.h"
#include "worker/collectives/allreduce.h"
#include "worker/collectives/transport.h"

namespace gradsync {

// Builds `algorithm` for `count` floats over `transport`. kAuto runs what
// options.tuning (or the built-in table) chooses for the world size and
// count * 4 bytes; if this build lacks that algorithm
// (UNIMPLEMENTED) it runs the ring. The result's algorithm() says which ran.
// UNIMPLEMENTED for an explicitly named algorithm this build does not have,
// INVALID_ARGUMENT for a bad value or options (hierarchical: bad groups).
absl::StatusOr<std::unique_ptr<Allreduce>> MakeAllreduce(AllreduceAlgorithm algorithm,
                                                         Transport* transport,
                                                         size_t count,
                                                         const AllreduceOptions& options);

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_ALLREDUCE_FACTORY_H_
