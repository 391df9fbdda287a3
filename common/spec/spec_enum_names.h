// The names of JobSpec's enums (strategy, mode, device, optimizer,
// algorithm, wire dtype, weight prediction, bench op): one table per enum, shared by the names
// and parsers (job_spec_names.cc) and the validation (job_spec.cc), so that a
// new value cannot get a parser without a name or the other way round.
// Internal to common/spec.
#ifndef GRADSYNC_COMMON_SPEC_SPEC_ENUM_NAMES_H_
#define GRADSYNC_COMMON_SPEC_SPEC_ENUM_NAMES_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {
namespace spec_internal {

// INVALID_ARGUMENT "field: what".
inline absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

template <typename E>
struct NameOf {
  E value;
  const char* name;
};

// The first name of a value is the one printed; "ring" is the strategy's
// old name, still read (the strategy is allreduce; ring is one algorithm).
inline constexpr NameOf<v1::Strategy> kStrategies[] = {
    {v1::STRATEGY_PS, "ps"},
    {v1::STRATEGY_ALLREDUCE, "allreduce"},
    {v1::STRATEGY_ALLREDUCE, "ring"}};
inline constexpr NameOf<v1::SyncMode> kModes[] = {{v1::SYNC_MODE_SYNC, "sync"},
                                                  {v1::SYNC_MODE_ASYNC, "async"}};
inline constexpr NameOf<v1::Device> kDevices[] = {{v1::DEVICE_CPU, "cpu"},
                                                  {v1::DEVICE_CUDA, "cuda"}};
inline constexpr NameOf<v1::Optimizer> kOptimizers[] = {{v1::OPTIMIZER_SGD, "sgd"},
                                                        {v1::OPTIMIZER_ADAM, "adam"}};
inline constexpr NameOf<v1::Algorithm> kAlgorithms[] = {
    {v1::ALGORITHM_AUTO, "auto"},
    {v1::ALGORITHM_RING, "ring"},
    {v1::ALGORITHM_HALVING_DOUBLING, "hd"},
    {v1::ALGORITHM_RECURSIVE_DOUBLING, "rd"},
    {v1::ALGORITHM_HIERARCHICAL, "hier"}};
inline constexpr NameOf<v1::WireDtype> kWireDtypes[] = {{v1::WIRE_DTYPE_FP32, "fp32"},
                                                        {v1::WIRE_DTYPE_BF16, "bf16"},
                                                        {v1::WIRE_DTYPE_FP16, "fp16"}};
inline constexpr NameOf<v1::WeightPrediction> kWeightPredictions[] = {
    {v1::WEIGHT_PREDICTION_ON, "on"}, {v1::WEIGHT_PREDICTION_OFF, "off"}};
inline constexpr NameOf<v1::BenchOp> kBenchOps[] = {{v1::BENCH_OP_ALLREDUCE, "allreduce"},
                                                    {v1::BENCH_OP_BROADCAST, "broadcast"},
                                                    {v1::BENCH_OP_PUSHPULL, "pushpull"}};

template <typename E, size_t N>
std::string NameIn(const NameOf<E> (&table)[N], E value) {
  if (static_cast<int>(value) == 0) return "unspecified";
  for (const auto& e : table) {
    if (e.value == value) return e.name;
  }
  return absl::StrCat("unknown(", static_cast<int>(value), ")");
}

template <typename E, size_t N>
absl::StatusOr<E> ParseIn(const NameOf<E> (&table)[N], absl::string_view field,
                          absl::string_view text) {
  std::string want;
  for (const auto& e : table) {
    if (text == e.name) return e.value;
    absl::StrAppend(&want, want.empty() ? "" : " or ", e.name);
  }
  return Bad(std::string(field),
             absl::StrCat("unknown ", field, " '", text, "' (want ", want, ")"));
}

// INVALID_ARGUMENT for a value that is set but not in the table (a client
// with a newer or broken wire format); the zero value is replaced by `dflt`.
template <typename E, size_t N>
absl::StatusOr<E> Known(const NameOf<E> (&table)[N], const std::string& field, E value,
                        E dflt) {
  if (static_cast<int>(value) == 0) return dflt;
  for (const auto& e : table) {
    if (e.value == value) return value;
  }
  return Bad(field, absl::StrCat("unknown value ", static_cast<int>(value)));
}

}  // namespace spec_internal
}  // namespace gradsync

#endif  // GRADSYNC_COMMON_SPEC_SPEC_ENUM_NAMES_H_
