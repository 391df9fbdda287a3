#include "client/timeline.h"

namespace gradsync {

void JobTimeline::Add(const v1::JobEvent& ev, absl::Time now) {
  if (!started_) {
    if (ev.state() != v1::RUNNING) return;
    started_ = true;
    zero_ = now;
  }
  const double t = absl::ToDoubleSeconds(now - zero_);
  if (ev.kind() == v1::JobEvent::PROGRESS) {
    if (ev.step() <= last_step_ || ev.step() == 0) return;
    last_step_ = ev.step();
    progress_.push_back({{"t", t},
                         {"step", ev.step()},
                         {"epoch", ev.epoch()},
                         {"loss", ev.loss()},
                         {"samples_per_second", ev.samples_per_second()}});
  } else if (ev.kind() == v1::JobEvent::EPOCH) {
    const v1::EpochResult& e = ev.epoch_result();
    epochs_.push_back({{"t", t},
                       {"epoch", e.epoch()},
                       {"train_loss", e.train_loss()},
                       {"test_accuracy", e.test_accuracy()}});
  }
}

nlohmann::json JobTimeline::ToJson() const {
  return {{"progress", progress_}, {"epochs", epochs_}};
}

}  // namespace gradsync
