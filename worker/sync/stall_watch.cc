#include "worker/sync/stall_watch.h"

#include <algorithm>
#include <utility>

namespace gradsync {

StallWatch::StallWatch(absl::Duration threshold, Sink sink, const Env* env)
    : threshold_(threshold), sink_(std::move(sink)), env_(env) {}

StallWait::StallWait(const StallWatch* watch)
    : watch_(watch), began_(watch != nullptr ? watch->Now() : absl::InfinitePast()) {}

StallWait::~StallWait() {
  if (!reported_ || failed_) return;
  reported_->waited = watch_->Now() - began_;
  reported_->resolved = true;
  watch_->Emit(*reported_);
}

absl::Time StallWait::Until(absl::Time deadline) const {
  if (watch_ == nullptr || reported_) return deadline;
  return std::min(deadline, began_ + watch_->threshold());
}

void StallWait::Check(absl::FunctionRef<StallReport()> describe) {
  if (watch_ == nullptr || reported_) return;
  const absl::Duration waited = watch_->Now() - began_;
  if (waited < watch_->threshold()) return;
  reported_ = describe();
  reported_->waited = waited;
  reported_->resolved = false;
  watch_->Emit(*reported_);
}

}  // namespace gradsync
