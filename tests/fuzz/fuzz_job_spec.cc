// libFuzzer target: JobSpec validation and the text parsers of common/spec.
//
// The input is parsed as a serialised gradsync.v1.JobSpec (parse failures are
// ignored) and validated against 3 available PS shards; a valid spec's model is
// parsed again and sized. The raw input is also fed as text to ParseModelSpec
// and the Parse* name functions.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/spec/job_spec.h"
#include "common/spec/model_spec.h"
#include "gradsync/v1/gradsync.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gradsync::v1::JobSpec spec;
  if (spec.ParseFromArray(data, static_cast<int>(size))) {
    absl::StatusOr<gradsync::v1::JobSpec> valid =
        gradsync::ValidateJobSpec(spec, /*available_ps_shards=*/3);
    if (valid.ok()) {
      absl::StatusOr<gradsync::MlpSpec> model = gradsync::ParseModelSpec(valid->model());
      if (!model.ok()) __builtin_trap();  // validated specs have a valid model
      (void)gradsync::NumParams(*model);
      (void)model->ToString();
      (void)gradsync::StepTimeout(*valid);
      (void)gradsync::OptimizerFromSpec(*valid);
      (void)gradsync::StrategyLabel(*valid);
    }
    (void)gradsync::StrategyName(spec.strategy());
    (void)gradsync::SyncModeName(spec.mode());
    (void)gradsync::DeviceName(spec.device());
    (void)gradsync::OptimizerName(spec.optimizer());
    (void)gradsync::ToOptimizerKind(spec.optimizer());
  }

  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<gradsync::MlpSpec> model = gradsync::ParseModelSpec(text);
  if (model.ok()) {
    (void)gradsync::NumParams(*model);
    (void)model->ToString();
  }
  (void)gradsync::ParseStrategy(text);
  (void)gradsync::ParseSyncMode(text);
  (void)gradsync::ParseDevice(text);
  (void)gradsync::ParseOptimizer(text);
  return 0;
}
