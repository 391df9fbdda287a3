// server/ps: a parameter-server shard — its state (this file and
// ps_slice.h) and the gRPC service in front of it (ps_service.h).
//
// Parameter-server shard state: the slices of each job that this shard holds,
// each a PsSlice with its own lock, optimizer and sync/async/SSP rules.
//
// No gRPC in here: replies are delivered through `Reply` callbacks so that the
// service can hold an RPC open without holding a thread, and tests can drive
// the store directly.
//
// State is keyed by a "slice key": the job id, or "JOB/PIECE" when a job
// splits its vector into independently synchronised pieces (the partitions of
// common/ps_layout.h, keyed "JOB/p<index>"; the bench keys its own). Every
// optimizer here is elementwise, so pieces updated separately give the same
// result as one vector. EndJob(JOB) drops them all.
//
// Locking: mu_ guards only the map of slices (held for a lookup, never while
// reducing); each slice reduces and steps under its own lock, so pushes to
// different slices run in parallel. Lock order: mu_ is never held while a
// slice's lock is taken.
//
// Thread-safe: every public method may be called concurrently. Reply
// callbacks run on the calling thread of whichever method completes them,
// after every lock has been released, exactly once each.
#ifndef GRADSYNC_SERVER_PS_PS_STORE_H_
#define GRADSYNC_SERVER_PS_PS_STORE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "server/ps/ps_slice.h"
#include "server/ps/pull_waiters.h"

namespace gradsync {

// Checkpoints: a store made with a checkpoint root keeps job J's checkpoint
// files in <root>/J/ (PsSlice writes them; PsStore::Init reads them back
// when a job resumes). They outlive EndJob and the process.
struct CheckpointListing {
  std::vector<int64_t> steps;  // where every slice of the job has one
  int slices = 0;              // slices with any checkpoint here
};

class PsStore {
 public:
  // Ended jobs remembered (so that their late calls are refused, not taken
  // for a new job) by default; the oldest ended is forgotten first.
  static constexpr size_t kDefaultMaxEndedJobs = 10000;
  // A remembered end reason is cut to this many bytes.
  static constexpr size_t kMaxEndReasonBytes = 1024;

  // `checkpoint_root` empty: jobs asking for checkpoints are refused.
  // `max_ended_jobs` (at least 1) bounds the ended-job tombstones. `env`
  // (not owned, outlives the store) is the clock pull deadlines are
  // compared with.
  explicit PsStore(std::string checkpoint_root = "",
                   size_t max_ended_jobs = kDefaultMaxEndedJobs,
                   const Env* env = Env::Default())
      : checkpoint_root_(std::move(checkpoint_root)),
        max_ended_jobs_(max_ended_jobs > 0 ? max_ended_jobs : 1),
        env_(env) {}
  PsStore(const PsStore&) = delete;
  PsStore& operator=(const PsStore&) = delete;

  // Installs slice `key` with its initial values. ALREADY_EXISTS if the slice
  // is installed, INVALID_ARGUMENT on a bad config, FAILED_PRECONDITION if
  // the job was ended or it asks for checkpoints and this store has no
  // checkpoint root. When config.resume_from is set, the slice instead
  // starts from the same piece's checkpoint of that job at
  // config.resume_step: NOT_FOUND / DATA_LOSS / FAILED_PRECONDITION (naming
  // the file) when it is missing, damaged, or of another size or step.
  // Wakes pending Pulls.
  absl::Status Init(const std::string& key, const ShardJobConfig& config,
                    std::vector<float> initial);

  // Replies with the current parameters, or with the initial ones when
  // `initial` (so that every rank starts from the same values even if an async
  // peer has already pushed). Waits for Init when the slice is not installed
  // yet, until `deadline` (at most kMaxPullWait; then DEADLINE_EXCEEDED),
  // CancelPull, EndJob or Shutdown; RESOURCE_EXHAUSTED at once when
  // kMaxPendingPulls wait already. Returns the wait's ticket for CancelPull
  // (0 when `reply` already ran).
  uint64_t Pull(const std::string& key, bool initial, Reply reply,
                absl::Time deadline = absl::InfiniteFuture());

  // The final pull of an async job: replies to each rank of slice `key`
  // with the current parameters once every rank (config.world_size) has
  // asked, so that all end with the same values after their last pushes.
  // Unknown slice -> FAILED_PRECONDITION; waits as Pull (deadline, cancel,
  // bound). Returns the ticket as Pull.
  uint64_t FinalPull(const std::string& key, int rank, Reply reply,
                     absl::Time deadline = absl::InfiniteFuture());

  // Ends the wait of `ticket` with `why` (the RPC was cancelled or passed
  // its deadline). No-op when it no longer waits.
  void CancelPull(uint64_t ticket, const absl::Status& why);

  // Push of `rank`'s gradient for `step` into slice `key`: unknown slice ->
  // FAILED_PRECONDITION, ended job -> ABORTED, shut down -> UNAVAILABLE;
  // otherwise PsSlice::Push (reduced at once under the slice's lock; the
  // N-th sync push runs the optimizer on this thread).
  void Push(const std::string& key, int64_t step, int rank, size_t count,
            absl::FunctionRef<void(float*)> accumulate, Reply reply);

  // Push, for a thread that must never wait (a gRPC reaction, for a small
  // push: a hand-off to the reduce threads costs more than the sum): false,
  // with nothing done and `*reply` untouched, when the store's or the
  // slice's lock is held by another thread or the slice writes checkpoints
  // (PsSlice::TryPush); else Push with std::move(*reply), and true. The
  // replies it completes (none, this one, or the N of a sync step, this
  // one's among them) are added to `done`, for the caller to run
  // (RunCompletions) with no lock held.
  bool TryPush(const std::string& key, int64_t step, int rank, size_t count,
               absl::FunctionRef<void(float*)> accumulate, Reply* reply,
               PsCompletions* done) ABSL_LOCKS_EXCLUDED(mu_);

  // Drops the job's slices; pending replies get ABORTED with `reason`. Later
  // calls for the job get ABORTED (Init: FAILED_PRECONDITION). OK if the job
  // is unknown.
  void EndJob(const std::string& job_id, const std::string& reason);

  // Ends every job (server shutdown): pending replies get UNAVAILABLE.
  void Shutdown();

  // The checkpoints of `job_id` in this store's root.
  CheckpointListing Checkpoints(const std::string& job_id) const;
  // Where job J's checkpoints live (<root>/J); empty: none kept here.
  const std::string& checkpoint_root() const { return checkpoint_root_; }

  // Slices installed, for tests and metrics.
  size_t NumJobs() const;
  // Ended jobs remembered (at most max_ended_jobs).
  size_t NumEndedJobs() const;
  // Pulls waiting (for Init or at the final barrier), for tests.
  size_t NumPendingPulls() const;

 private:
  // The slice for `key`; NOT_FOUND when not installed (yet), or the error
  // every call for it gets (shut down, job ended).
  absl::StatusOr<std::shared_ptr<PsSlice>> Find(const std::string& key) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The answer to a push whose slice Find did not give (`why`).
  static absl::Status PushRefusal(const std::string& key, const absl::Status& why);
  // The slice Init installs: fresh, or loaded from a checkpoint.
  // Adds `reply` to `waiters` under a new ticket; runs it with the error
  // instead when they are full. Also expires overdue waiters of both lists
  // into `expired` (the caller replies to them after unlocking).
  uint64_t Wait(PullWaiters* waiters, const std::string& key, int rank, Reply* reply,
                absl::Time deadline, absl::Status* refused,
                std::vector<PendingPull>* expired) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::unique_ptr<PsSlice>> MakeSlice(const std::string& key,
                                                     ShardJobConfig config,
                                                     std::vector<float> initial) const;
  // The slice of `config` (its checkpoint fields set) continued from
  // config.resume_from's checkpoint at resume_step; `size` floats.
  absl::StatusOr<std::unique_ptr<PsSlice>> ResumeSlice(const ShardJobConfig& config,
                                                       size_t size) const;

  // Records `job_id` as ended with `why` and forgets the oldest tombstones
  // beyond max_ended_jobs_.
  void RememberEnded(const std::string& job_id, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string checkpoint_root_;
  const size_t max_ended_jobs_;
  const Env* const env_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<PsSlice>> slices_ ABSL_GUARDED_BY(mu_);
  // Pulls waiting for Init / at the final barrier; tickets from next_ticket_.
  PullWaiters pull_waiters_ ABSL_GUARDED_BY(mu_);
  PullWaiters final_waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, std::string> ended_ ABSL_GUARDED_BY(mu_);  // id->reason
  std::deque<std::string> ended_order_ ABSL_GUARDED_BY(mu_);       // oldest first
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_PS_PS_STORE_H_
