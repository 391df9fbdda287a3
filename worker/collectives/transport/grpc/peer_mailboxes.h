// The receiving side's state of the gRPC transport: one mailbox per job that
// runs on this worker, and the admission of incoming Peer streams.
//
// Admission (issue 9): a Peer stream says at open, in its metadata, which job
// it belongs to, which rank sends on it and the job's secret
// (common/grpc/job_secret.h). It is admitted only when this worker runs that
// job (Open, from its own assignment), the secret is the job's and the rank
// is one of the job's; before that, no frame of it is read. A stream for a
// job not opened yet (a neighbour may start before this worker received its
// assignment) waits, at most kAdmitWait and at most kMaxWaitingStreams of
// them, then is refused: frames for unknown jobs are never stored.
//
// Flow control: a mailbox holds at most kMailboxFrames frames or
// kMailboxBytes bytes per source; beyond that the stream's reactor stops
// reading until the collective consumes one, so HTTP/2 flow control holds
// the sender back.
#ifndef GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_PEER_MAILBOXES_H_
#define GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_PEER_MAILBOXES_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/grpc/tensor_frame.h"

namespace gradsync {

inline constexpr size_t kMailboxFrames = 16;
inline constexpr size_t kMailboxBytes = size_t{32} << 20;
inline constexpr size_t kMaxWaitingStreams = 64;
inline constexpr absl::Duration kAdmitWait = absl::Seconds(5);
// Ended jobs remembered (to refuse their late streams), oldest forgotten first.
inline constexpr size_t kMaxClosedJobs = 4096;

// Called once to let a parked stream go on: OK to read its next frame, an
// error to end the stream with it. May run on any thread.
using Resume = std::function<void(const absl::Status&)>;

// What Push did with a frame.
enum class Delivery {
  kTaken,   // read the next frame
  kParked,  // do not read until `resume` runs
};

// Received frames of one job, by sending rank and lane (the connection they
// came on: FIFO order holds per connection only). Thread-safe.
class JobMailbox {
 public:
  // Pops wait on `env`'s clock (not owned, outlives the mailbox).
  explicit JobMailbox(const Env* env = Env::Default()) : env_(env) {}

  // Appends a frame. kParked when the source's queue is full: `resume` runs
  // once a Pop made room (or with the error when the mailbox fails). The
  // mailbox's error if it has failed.
  absl::StatusOr<Delivery> Push(DecodedFrame frame, Resume resume);
  // Oldest frame from `src` on `lane`; DEADLINE_EXCEEDED, or the failure
  // status.
  absl::StatusOr<DecodedFrame> Pop(int src, int lane, absl::Time deadline);
  // Makes pending and future Pops fail with `status` (first failure wins);
  // parked streams are resumed with it.
  void Fail(const absl::Status& status);

 private:
  struct Source {
    std::deque<DecodedFrame> frames;
    size_t bytes = 0;
    Resume parked;  // set while the source's stream waits for room
  };
  const Env* const env_;
  absl::Mutex mu_;
  std::map<std::pair<int, int>, Source> sources_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

// Who a Peer stream says it is (its metadata at open).
struct PeerCredentials {
  std::string job_id;
  int rank = -1;
  std::string secret;
};

// Answer to an admission: the job's mailbox, or why the stream is refused.
using AdmitFn = std::function<void(absl::StatusOr<std::shared_ptr<JobMailbox>>)>;

// The mailboxes of all jobs on this worker. Thread-safe. Runs one thread
// that ends overdue admission waits.
class PeerMailboxes {
 public:
  // Admission waits and Pops are timed on `env` (not owned, outlives this);
  // the reaper wakes every 200 ms of real time to compare them with
  // env->Now().
  explicit PeerMailboxes(const Env* env = Env::Default());
  // Refuses streams still waiting (UNAVAILABLE) and joins the thread.
  ~PeerMailboxes();
  PeerMailboxes(const PeerMailboxes&) = delete;
  PeerMailboxes& operator=(const PeerMailboxes&) = delete;

  // Registers job `job_id` of `world` ranks with its secret and returns its
  // mailbox (the same one on later calls); streams waiting for the job are
  // admitted or refused now. A job that already ended here gets a failed
  // mailbox.
  std::shared_ptr<JobMailbox> Open(const std::string& job_id, const std::string& secret,
                                   int world);
  // Fails the job's mailbox and refuses later streams for it.
  void Close(const std::string& job_id, const absl::Status& why);
  // Admits a stream that presents `creds`; runs `admit` exactly once, maybe
  // on this thread before returning: the mailbox of an open job whose
  // secret and ranks match; PERMISSION_DENIED when they do not;
  // FAILED_PRECONDITION for a job that ended here; for a job not opened yet,
  // after a wait of at most kAdmitWait (then NOT_FOUND), or at once
  // RESOURCE_EXHAUSTED when kMaxWaitingStreams wait already.
  void Admit(const PeerCredentials& creds, AdmitFn admit);
  // Streams waiting for admission (for tests).
  size_t waiting() const;

 private:
  struct Job {
    std::shared_ptr<JobMailbox> box;
    std::string secret;
    int world = 0;
  };
  struct Waiting {
    PeerCredentials creds;
    AdmitFn admit;
    absl::Time until;
  };
  // The answer for `creds` against open job `job`.
  static absl::StatusOr<std::shared_ptr<JobMailbox>> Check(const Job& job,
                                                           const PeerCredentials& creds);
  // Removes and returns the streams waiting for `job_id`.
  std::vector<Waiting> TakeWaiting(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReaperLoop();

  const Env* const env_;
  mutable absl::Mutex mu_;
  std::map<std::string, Job> open_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> closed_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> closed_order_ ABSL_GUARDED_BY(mu_);
  std::vector<Waiting> waiting_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_COLLECTIVES_TRANSPORT_GRPC_PEER_MAILBOXES_H_
