// JobSpec's names and parsers, labels and the small derived values
// (job_spec.h); the validation is in job_spec.cc.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/job_spec.h"
#include "common/spec/spec_enum_names.h"

namespace gradsync {

using spec_internal::Bad;
using spec_internal::kAlgorithms;
using spec_internal::kBenchOps;
using spec_internal::kDevices;
using spec_internal::kModes;
using spec_internal::kOptimizers;
using spec_internal::kStrategies;
using spec_internal::kWeightPredictions;
using spec_internal::kWireDtypes;
using spec_internal::NameIn;
using spec_internal::ParseIn;

std::string StrategyName(v1::Strategy s) { return NameIn(kStrategies, s); }
std::string SyncModeName(v1::SyncMode m) { return NameIn(kModes, m); }
std::string DeviceName(v1::Device d) { return NameIn(kDevices, d); }
std::string OptimizerName(v1::Optimizer o) { return NameIn(kOptimizers, o); }
std::string AlgorithmName(v1::Algorithm a) { return NameIn(kAlgorithms, a); }

std::string WireDtypeName(v1::WireDtype d) { return NameIn(kWireDtypes, d); }
absl::StatusOr<v1::WireDtype> ParseWireDtype(absl::string_view text) {
  return ParseIn(kWireDtypes, "wire_dtype", text);
}
std::string WeightPredictionName(v1::WeightPrediction w) {
  return NameIn(kWeightPredictions, w);
}
absl::StatusOr<v1::WeightPrediction> ParseWeightPrediction(absl::string_view text) {
  if (text == "auto") return v1::WEIGHT_PREDICTION_UNSPECIFIED;
  return ParseIn(kWeightPredictions, "weight_prediction", text);
}

std::string BenchOpName(v1::BenchOp op) { return NameIn(kBenchOps, op); }
absl::StatusOr<v1::BenchOp> ParseBenchOp(absl::string_view text) {
  return ParseIn(kBenchOps, "op", text);
}

bool IsBench(const v1::JobSpec& spec) { return spec.kind() == v1::JOB_KIND_BENCH; }

bool UsesPs(const v1::JobSpec& spec) {
  if (IsBench(spec)) return spec.bench().op() == v1::BENCH_OP_PUSHPULL;
  return spec.strategy() == v1::STRATEGY_PS;
}

absl::StatusOr<v1::Strategy> ParseStrategy(absl::string_view text) {
  return ParseIn(kStrategies, "strategy", text);
}
absl::StatusOr<v1::SyncMode> ParseSyncMode(absl::string_view text) {
  return ParseIn(kModes, "mode", text);
}
absl::StatusOr<v1::Device> ParseDevice(absl::string_view text) {
  return ParseIn(kDevices, "device", text);
}
absl::StatusOr<v1::Optimizer> ParseOptimizer(absl::string_view text) {
  return ParseIn(kOptimizers, "optimizer", text);
}
absl::StatusOr<v1::Algorithm> ParseAlgorithm(absl::string_view text) {
  if (text == kOldRecursiveDoublingName) return v1::ALGORITHM_RECURSIVE_DOUBLING;
  return ParseIn(kAlgorithms, "algorithm", text);
}

AllreduceAlgorithm AllreduceAlgorithmOf(v1::Algorithm algorithm) {
  switch (algorithm) {
    case v1::ALGORITHM_RING:
      return AllreduceAlgorithm::kRing;
    case v1::ALGORITHM_HALVING_DOUBLING:
      return AllreduceAlgorithm::kHalvingDoubling;
    case v1::ALGORITHM_RECURSIVE_DOUBLING:
      return AllreduceAlgorithm::kRecursiveDoubling;
    case v1::ALGORITHM_HIERARCHICAL:
      return AllreduceAlgorithm::kHierarchical;
    default:
      return AllreduceAlgorithm::kAuto;
  }
}

v1::Algorithm WireAlgorithm(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kRing:
      return v1::ALGORITHM_RING;
    case AllreduceAlgorithm::kHalvingDoubling:
      return v1::ALGORITHM_HALVING_DOUBLING;
    case AllreduceAlgorithm::kRecursiveDoubling:
      return v1::ALGORITHM_RECURSIVE_DOUBLING;
    case AllreduceAlgorithm::kHierarchical:
      return v1::ALGORITHM_HIERARCHICAL;
    case AllreduceAlgorithm::kAuto:
      break;
  }
  return v1::ALGORITHM_AUTO;
}

std::string StrategyLabel(const v1::JobSpec& spec) {
  std::string s =
      absl::StrCat(StrategyName(spec.strategy()), "-", SyncModeName(spec.mode()));
  const bool predicted = spec.weight_prediction() == v1::WEIGHT_PREDICTION_ON;
  if (spec.mode() == v1::SYNC_MODE_ASYNC && spec.has_staleness()) {
    absl::StrAppend(&s, "(s=", spec.staleness(), predicted ? ",wp)" : ")");
  } else if (predicted) {
    absl::StrAppend(&s, "(wp)");
  }
  return s;
}

std::string AlgorithmSource(const v1::JobSpec& spec) {
  if (IsBench(spec) || spec.strategy() != v1::STRATEGY_ALLREDUCE) return "";
  if (spec.algorithm() != v1::ALGORITHM_AUTO &&
      spec.algorithm() != v1::ALGORITHM_UNSPECIFIED) {
    return "forced";
  }
  return spec.tuning_table().empty() ? "table" : "tuned";
}

absl::Duration StepTimeout(const v1::JobSpec& spec) {
  return absl::Milliseconds(spec.step_timeout_ms() > 0 ? spec.step_timeout_ms()
                                                       : kDefaultStepTimeoutMs);
}

absl::Duration StallThreshold(const v1::JobSpec& spec) {
  return spec.stall_report_ms() > 0 ? absl::Milliseconds(spec.stall_report_ms())
                                    : StepTimeout(spec) / 2;
}

std::string StallText(const v1::WorkerMessage::Stall& s) {
  std::string text = absl::StrFormat("rank %d %s %.1f s for %s at step %d", s.rank(),
                                     s.resolved() ? "waited" : "waiting",
                                     s.waited_ms() / 1000.0, s.waiting_for(), s.step());
  if (s.bucket() >= 0) absl::StrAppend(&text, " bucket ", s.bucket());
  if (!s.phase().empty()) absl::StrAppend(&text, " ", s.phase());
  if (s.resolved()) absl::StrAppend(&text, " (resolved)");
  return text;
}

OptimizerOptions OptimizerFromSpec(const v1::JobSpec& spec) {
  OptimizerOptions o;
  o.kind =
      spec.optimizer() == v1::OPTIMIZER_ADAM ? OptimizerKind::kAdam : OptimizerKind::kSgd;
  o.lr = spec.lr();
  o.momentum = spec.momentum();
  return o;
}

absl::StatusOr<OptimizerKind> ToOptimizerKind(v1::Optimizer o) {
  switch (o) {
    case v1::OPTIMIZER_SGD:
      return OptimizerKind::kSgd;
    case v1::OPTIMIZER_ADAM:
      return OptimizerKind::kAdam;
    default:
      return Bad("optimizer", absl::StrCat("unknown optimizer ", OptimizerName(o)));
  }
}

}  // namespace gradsync
