// What every client command that waits on a job shares (submit --wait,
// watch, bench, local): the error text of a failed call, and the watch
// itself: stream the job's events until it ends, then read the final job,
// or cancel it when the user interrupted.
#ifndef GRADSYNC_CLIENT_JOB_WATCH_H_
#define GRADSYNC_CLIENT_JOB_WATCH_H_

#include <atomic>
#include <functional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

namespace gradsync {

// "CODE: message" of a failed call; an UNAUTHENTICATED one says how to give
// the cluster's token.
std::string RpcError(const grpc::Status& st);

struct WatchHooks {
  // Called with each event as it arrives.
  std::function<void(const v1::JobEvent&)> on_event;
  // Told the watch's context while the stream is open (and nullptr after),
  // so that a Ctrl-C can cancel it; may be empty.
  std::function<void(grpc::ClientContext*)> set_context;
  // True once the user interrupted; may be null.
  const std::atomic<bool>* interrupted = nullptr;
};

struct WatchEnd {
  // The job as it ended (GetJob), or, when interrupted, as CancelJob
  // answered (empty if that failed).
  v1::Job job;
  bool interrupted = false;
};

// Streams job `id`'s events to hooks.on_event until the stream ends. The
// stream has no deadline (a job may run for hours); the channel's keepalive
// ends it if the server vanishes. Then: interrupted, CancelJob (3 s
// deadline) and its answer; else GetJob (5 s deadline) and the job.
// UNAVAILABLE "watch ID: ..." when the stream failed, "status ID: ..."
// when GetJob did.
absl::StatusOr<WatchEnd> WatchToEnd(v1::Coordinator::Stub* stub, const std::string& id,
                                    const WatchHooks& hooks);

}  // namespace gradsync

#endif  // GRADSYNC_CLIENT_JOB_WATCH_H_
