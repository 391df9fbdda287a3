#include "common/spec/job_spec.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

}  // namespace

absl::StatusOr<v1::JobSpec> ValidateJobSpec(const v1::JobSpec& in,
                                            int available_ps_shards) {
  v1::JobSpec s = in;
  if (s.workers() <= 0) {
    return Bad("workers", absl::StrCat("must be >= 1, got ", s.workers()));
  }
  if (s.strategy().empty()) s.set_strategy("ring");
  if (s.strategy() != "ps" && s.strategy() != "ring") {
    return Bad("strategy", absl::StrCat("unknown strategy '", s.strategy(),
                                        "' (want ps or ring)"));
  }
  if (s.mode().empty()) s.set_mode("sync");
  if (s.mode() != "sync" && s.mode() != "async") {
    return Bad("mode", absl::StrCat("unknown mode '", s.mode(),
                                    "' (want sync or async)"));
  }
  if (s.has_staleness() && s.staleness() < 0) {
    return Bad("staleness", absl::StrCat("must be >= 0, got ", s.staleness()));
  }
  if (s.strategy() == "ring" && s.mode() == "async" && !s.has_staleness()) {
    s.set_staleness(1);
  }
  if (s.strategy() == "ring" && s.mode() == "async" && s.staleness() == 0) {
    return Bad("staleness", "ring async needs staleness >= 1 (0 is ring sync)");
  }
  if (s.dataset().empty()) s.set_dataset("fashion-mnist");
  if (s.dataset() != "fashion-mnist") {
    return Bad("dataset", absl::StrCat("unknown dataset '", s.dataset(),
                                       "' (want fashion-mnist)"));
  }
  if (s.model().empty()) s.set_model(kDefaultModel);
  absl::StatusOr<MlpSpec> model = ParseModelSpec(s.model());
  if (!model.ok()) return Bad("model", std::string(model.status().message()));
  if (model->widths.front() != kFashionMnistFeatures) {
    return Bad("model", absl::StrCat("input width ", model->widths.front(),
                                     " does not match fashion-mnist's ",
                                     kFashionMnistFeatures, " features"));
  }
  if (model->widths.back() != kFashionMnistClasses) {
    return Bad("model", absl::StrCat("output width ", model->widths.back(),
                                     " does not match fashion-mnist's ",
                                     kFashionMnistClasses, " classes"));
  }
  if (s.batch_size() <= 0) {
    return Bad("batch_size", absl::StrCat("must be >= 1, got ", s.batch_size()));
  }
  if (s.optimizer().empty()) s.set_optimizer("sgd");
  if (s.optimizer() != "sgd" && s.optimizer() != "adam") {
    return Bad("optimizer", absl::StrCat("unknown optimizer '", s.optimizer(),
                                         "' (want sgd or adam)"));
  }
  if (!std::isfinite(s.lr()) || s.lr() < 0) {
    return Bad("lr", absl::StrCat("must be a positive number, got ", s.lr()));
  }
  if (s.lr() == 0) s.set_lr(s.optimizer() == "adam" ? 0.001f : 0.05f);
  if (!std::isfinite(s.momentum()) || s.momentum() < 0 || s.momentum() >= 1) {
    return Bad("momentum", absl::StrCat("must be in [0, 1), got ", s.momentum()));
  }
  if (s.epochs() < 0) return Bad("epochs", "must be >= 0");
  if (s.steps() < 0) return Bad("steps", "must be >= 0");
  if (s.epochs() == 0 && s.steps() == 0) s.set_epochs(1);
  if (s.device().empty()) s.set_device("cpu");
  if (s.device() != "cpu" && s.device() != "cuda") {
    return Bad("device", absl::StrCat("unknown device '", s.device(),
                                      "' (want cpu or cuda)"));
  }
  if (s.ps_shards() < 0) return Bad("ps_shards", "must be >= 0");
  if (s.ps_shards() == 0) s.set_ps_shards(1);
  if (s.strategy() == "ps" && s.ps_shards() > available_ps_shards) {
    return Bad("ps_shards",
               absl::StrCat("job wants ", s.ps_shards(),
                            " parameter-server shards but the coordinator has ",
                            available_ps_shards,
                            " (start more with --role=ps and list them in "
                            "--ps_shards of the coordinator)"));
  }
  if (s.bucket_bytes() < 0) return Bad("bucket_bytes", "must be >= 0");
  if (s.bucket_bytes() == 0) s.set_bucket_bytes(25 << 20);
  if (s.chunk_bytes() < 0) return Bad("chunk_bytes", "must be >= 0");
  if (s.chunk_bytes() == 0) s.set_chunk_bytes(1 << 20);
  if (s.chunk_bytes() < 4) return Bad("chunk_bytes", "must be >= 4");
  if (s.step_timeout_ms() < 0) return Bad("step_timeout_ms", "must be >= 0");
  if (s.step_timeout_ms() == 0) s.set_step_timeout_ms(30000);
  if (s.train_limit() < 0) return Bad("train_limit", "must be >= 0");
  if (s.train_limit() > 0 &&
      s.train_limit() < static_cast<int64_t>(s.workers()) * s.batch_size()) {
    return Bad("train_limit", "smaller than one global batch");
  }
  return s;
}

}  // namespace gradsync
