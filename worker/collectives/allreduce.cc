#include "worker/collectives/allreduce.h"

#include "absl/strings/str_cat.h"
#include "worker/collectives/ring.h"

namespace gradsync {

absl::StatusOr<std::unique_ptr<Allreduce>> MakeAllreduce(
    v1::Algorithm algorithm, Transport* transport, size_t count,
    const AllreduceOptions& options) {
  const RingOptions ring{options.segment_bytes, options.timeout};
  switch (algorithm) {
    case v1::ALGORITHM_UNSPECIFIED:
    case v1::ALGORITHM_AUTO:
    case v1::ALGORITHM_RING:
      return std::unique_ptr<Allreduce>(
          std::make_unique<RingAllreduce>(transport, count, ring));
    case v1::ALGORITHM_HALVING_DOUBLING:
    case v1::ALGORITHM_TREE:
    case v1::ALGORITHM_HIERARCHICAL:
      return absl::UnimplementedError(
          absl::StrCat("allreduce algorithm ", v1::Algorithm_Name(algorithm),
                       " is not built yet"));
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown allreduce algorithm ", static_cast<int>(algorithm)));
}

}  // namespace gradsync
