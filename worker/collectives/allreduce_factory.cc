#include "worker/collectives/allreduce_factory.h"

#include "absl/strings/str_cat.h"
#include "common/spec/tuning_table.h"
#include "worker/collectives/halving_doubling.h"
#include "worker/collectives/hierarchical.h"
#include "worker/collectives/recursive_doubling.h"
#include "worker/collectives/ring.h"

namespace gradsync {
namespace {

// kAuto: the tuning table's choice for this world and message size;
// the ring where this build lacks the chosen algorithm (UNIMPLEMENTED), so a
// table written by a newer build still runs.
absl::StatusOr<std::unique_ptr<Allreduce>> MakeAuto(Transport* transport, size_t count,
                                                    const AllreduceOptions& options) {
  const TuningTable& table =
      options.tuning != nullptr ? *options.tuning : TuningTable::Default();
  AllreduceAlgorithm chosen =
      table.Choose(transport->size(), static_cast<uint64_t>(count) * sizeof(float));
  if (chosen == AllreduceAlgorithm::kAuto) {
    chosen = AllreduceAlgorithm::kRing;  // a table never names it; no recursion
  }
  absl::StatusOr<std::unique_ptr<Allreduce>> made =
      MakeAllreduce(chosen, transport, count, options);
  if (absl::IsUnimplemented(made.status())) {
    return MakeAllreduce(AllreduceAlgorithm::kRing, transport, count, options);
  }
  return made;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Allreduce>> MakeAllreduce(
    AllreduceAlgorithm algorithm, Transport* transport, size_t count,
    const AllreduceOptions& options) {
  const RingOptions ring{options.segment_bytes, options.timeout, options.env};
  switch (algorithm) {
    case AllreduceAlgorithm::kAuto:
      return MakeAuto(transport, count, options);
    case AllreduceAlgorithm::kRing:
      return std::unique_ptr<Allreduce>(
          std::make_unique<RingAllreduce>(transport, count, ring));
    case AllreduceAlgorithm::kHalvingDoubling:
      return std::unique_ptr<Allreduce>(
          std::make_unique<HalvingDoublingAllreduce>(transport, count, options));
    case AllreduceAlgorithm::kRecursiveDoubling:
      return std::unique_ptr<Allreduce>(
          std::make_unique<RecursiveDoublingAllreduce>(transport, count, options));
    case AllreduceAlgorithm::kHierarchical: {
      auto hier = HierarchicalAllreduce::Create(transport, count, options);
      if (!hier.ok()) return hier.status();
      return std::unique_ptr<Allreduce>(std::move(*hier));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown allreduce algorithm ", static_cast<int>(algorithm)));
}

}  // namespace gradsync
