// A per-job timeline recorder (the `--trace` option): complete events
// {name, category, thread, start, duration, step, bucket, layer} kept in a
// bounded buffer, later shipped with JobDone and merged by the client into
// one Chrome trace (client/trace_json.h).
//
// Cost when off: callers hold a `TraceRecorder*` that is null when the job
// does not trace; `TraceSpan` and the helpers below check it and do nothing
// else (no clock read, no allocation).
#ifndef GRADSYNC_COMMON_TRACE_TRACE_H_
#define GRADSYNC_COMMON_TRACE_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"

namespace gradsync {

// Thread rows of a rank (Chrome trace tid).
enum TraceThread : int { kTraceTrain = 0, kTraceCopy = 1, kTraceSync = 2 };
const char* TraceThreadName(int thread);

// One event. `name` and `category` point to string literals (static storage):
// recording copies no string.
struct TraceEvent {
  const char* name = "";
  const char* category = "";
  int thread = kTraceTrain;
  int64_t start_us = 0;  // unix microseconds (wall clock)
  int64_t dur_us = 0;    // < 0: an instant event
  int64_t step = -1;
  int bucket = -1;
  int layer = -1;
};

// Thread-safe: Record / Take / dropped may be called from any thread.
// Memory is bounded by max_events (the buffer grows up to it; later events
// are counted in dropped(), not kept).
class TraceRecorder {
 public:
  static constexpr size_t kDefaultMaxEvents = 200000;

  explicit TraceRecorder(size_t max_events = kDefaultMaxEvents)
      : max_events_(max_events) {}

  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // Wall-clock unix microseconds on `env`'s clock (the real one by
  // default): ranks on different hosts line up to within their clock sync,
  // without a handshake.
  static int64_t NowUs(const Env* env = Env::Default());

  void Record(const TraceEvent& e) ABSL_LOCKS_EXCLUDED(mu_);

  // Moves the events out (recording order) and leaves the buffer empty.
  std::vector<TraceEvent> Take() ABSL_LOCKS_EXCLUDED(mu_);
  int64_t dropped() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const size_t max_events_;
  absl::Mutex mu_;
  std::vector<TraceEvent> events_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// Records an instant event now (no-op when `r` is null).
void TraceInstant(TraceRecorder* r, const char* name, const char* category, int thread,
                  int64_t step, int bucket = -1);

// RAII span: records [construction, destruction) as one complete event on
// `thread`. No-op when `r` is null.
class TraceSpan {
 public:
  TraceSpan(TraceRecorder* r, const char* name, const char* category, int thread,
            int64_t step, int bucket = -1, int layer = -1)
      : r_(r) {
    if (r_ == nullptr) return;
    e_.name = name;
    e_.category = category;
    e_.thread = thread;
    e_.step = step;
    e_.bucket = bucket;
    e_.layer = layer;
    e_.start_us = TraceRecorder::NowUs();
  }
  ~TraceSpan() {
    if (r_ == nullptr) return;
    e_.dur_us = TraceRecorder::NowUs() - e_.start_us;
    r_->Record(e_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  TraceRecorder* const r_;
  TraceEvent e_;
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_TRACE_TRACE_H_
