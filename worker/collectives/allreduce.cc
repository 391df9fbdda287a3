#include "worker/collectives/allreduce.h"

#include "absl/strings/str_cat.h"
#include "worker/collectives/halving_doubling.h"
#include "worker/collectives/hierarchical.h"
#include "worker/collectives/recursive_doubling.h"
#include "worker/collectives/ring.h"
#include "common/spec/tuning_table.h"

namespace gradsync {
namespace {

// ALGORITHM_AUTO: the tuning table's choice for this world and message size;
// the ring where this build lacks the chosen algorithm (UNIMPLEMENTED), so a
// table written by a newer build still runs.
absl::StatusOr<std::unique_ptr<Allreduce>> MakeAuto(
    Transport* transport, size_t count, const AllreduceOptions& options) {
  const TuningTable& table =
      options.tuning != nullptr ? *options.tuning : TuningTable::Default();
  v1::Algorithm chosen = table.Choose(transport->size(),
                                      static_cast<uint64_t>(count) * sizeof(float));
  if (chosen == v1::ALGORITHM_AUTO || chosen == v1::ALGORITHM_UNSPECIFIED) {
    chosen = v1::ALGORITHM_RING;  // a table never names these; no recursion
  }
  absl::StatusOr<std::unique_ptr<Allreduce>> made =
      MakeAllreduce(chosen, transport, count, options);
  if (absl::IsUnimplemented(made.status())) {
    return MakeAllreduce(v1::ALGORITHM_RING, transport, count, options);
  }
  return made;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Allreduce>> MakeAllreduce(
    v1::Algorithm algorithm, Transport* transport, size_t count,
    const AllreduceOptions& options) {
  const RingOptions ring{options.segment_bytes, options.timeout};
  switch (algorithm) {
    case v1::ALGORITHM_UNSPECIFIED:
    case v1::ALGORITHM_AUTO:
      return MakeAuto(transport, count, options);
    case v1::ALGORITHM_RING:
      return std::unique_ptr<Allreduce>(
          std::make_unique<RingAllreduce>(transport, count, ring));
    case v1::ALGORITHM_HALVING_DOUBLING:
      return std::unique_ptr<Allreduce>(
          std::make_unique<HalvingDoublingAllreduce>(transport, count,
                                                     options));
    case v1::ALGORITHM_TREE:
      return std::unique_ptr<Allreduce>(
          std::make_unique<RecursiveDoublingAllreduce>(transport, count,
                                                       options));
    case v1::ALGORITHM_HIERARCHICAL: {
      auto hier = HierarchicalAllreduce::Create(transport, count, options);
      if (!hier.ok()) return hier.status();
      return std::unique_ptr<Allreduce>(std::move(*hier));
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown allreduce algorithm ", static_cast<int>(algorithm)));
}

}  // namespace gradsync
