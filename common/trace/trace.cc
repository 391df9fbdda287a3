#include "common/trace/trace.h"

#include <utility>

#include "absl/time/time.h"

namespace gradsync {

const char* TraceThreadName(int thread) {
  switch (thread) {
    case kTraceTrain:
      return "training";
    case kTraceCopy:
      return "comm: copy";
    case kTraceSync:
      return "comm: sync";
  }
  return "other";
}

int64_t TraceRecorder::NowUs(const Env* env) { return absl::ToUnixMicros(env->Now()); }

void TraceRecorder::Record(const TraceEvent& e) {
  absl::MutexLock lock(&mu_);
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  events_.push_back(e);
}

std::vector<TraceEvent> TraceRecorder::Take() {
  absl::MutexLock lock(&mu_);
  std::vector<TraceEvent> out;
  out.swap(events_);
  return out;
}

int64_t TraceRecorder::dropped() {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

void TraceInstant(TraceRecorder* r, const char* name, const char* category, int thread,
                  int64_t step, int bucket) {
  if (r == nullptr) return;
  TraceEvent e;
  e.name = name;
  e.category = category;
  e.thread = thread;
  e.start_us = TraceRecorder::NowUs();
  e.dur_us = -1;
  e.step = step;
  e.bucket = bucket;
  r->Record(e);
}

}  // namespace gradsync
