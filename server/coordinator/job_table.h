// The coordinator's job table: jobs in submission order, placement onto
// idle workers (ranks in registration order, PS shard partition), per-rank
// progress / epoch / JobDone reports, the checksum comparisons, the
// symptom-grace rule, cancellation, lost workers, results and the event log
// that WatchJob streams. Its parts are classes of their own, each over the
// table's entries (job_entry.h): the queue and its backfill rule
// (job_queue.h), the elastic generations' records (generations.h), the
// history it saves and recovers (job_history.h) and what it keeps of ended
// jobs (retention.h).
//
// Plain logic: no gRPC, no threads, no sleeps, time from an injected Env (common/env.h).
// What must happen outside (a message to a worker, EndJob on PS shards) is
// appended to a Decisions list that the caller carries out, in order. The
// one I/O is the optional JobStore (job_store.h): every job creation, state
// transition and epoch result is saved there, one transaction each, before
// the call returns; step progress and heartbeats are not (they change every
// step and are gone after a restart anyway). Not thread-safe; the
// Coordinator calls it under its mutex.
#ifndef GRADSYNC_SERVER_COORDINATOR_JOB_TABLE_H_
#define GRADSYNC_SERVER_COORDINATOR_JOB_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/grpc/job_secret.h"
#include "common/message_limits.h"
#include "common/spec/model_spec.h"
#include "gradsync/v1/gradsync.pb.h"
#include "server/coordinator/generations.h"
#include "server/coordinator/job_curves.h"
#include "server/coordinator/job_entry.h"
#include "server/coordinator/job_history.h"
#include "server/coordinator/job_queue.h"
#include "server/coordinator/job_store.h"
#include "server/coordinator/retention.h"
#include "server/coordinator/worker_registry.h"

namespace gradsync {

// How long a rank's network-looking error (UNAVAILABLE, CANCELLED, ABORTED,
// DEADLINE_EXCEEDED: a peer may have vanished) waits for the root cause, a
// lost worker, to be reported before it becomes the job's error.
inline constexpr absl::Duration kSymptomGrace = absl::Milliseconds(1500);

// Elastic jobs (job_table_elastic.cc). A re-formation waits up to
// kSurvivorWait for the ended generation's live ranks to stop (they were
// cancelled and report JobDone within milliseconds) before it places the
// next one without those still busy. After kMaxGenerations generations the
// job FAILS (a job that keeps losing ranks is not making progress).
inline constexpr absl::Duration kSurvivorWait = absl::Seconds(5);
inline constexpr int kMaxGenerations = 64;
// Generations in a row that made no progress (ended before their rank 0
// reported, or at the step they started from: a PS shard that is gone, a
// start-up error on every placement, a member no peer can reach) fail the
// job with the last one's reason rather than re-forming again.
inline constexpr int kMaxGenerationsWithoutProgress = 3;

// SUCCEEDED, FAILED or CANCELLED: the job has ended.
bool IsTerminal(v1::JobState s);

// "<unix ms, base 36><random, base 36>-": a job-id prefix that differs
// between coordinator starts, even several within one second.
std::string UniqueIdPrefix(absl::Time start, uint32_t random);

// A message for one worker's session.
struct WorkerSend {
  std::string worker_id;
  v1::CoordinatorMessage message;
};

// ParameterServer.EndJob for `job_id` on each of `shard_addresses`.
struct ShardEndJob {
  std::string job_id;
  std::vector<std::string> shard_addresses;
  std::string reason;
  // The job's credential (common/grpc/job_secret.h), sent as call metadata
  // so the shards know the coordinator is allowed to end it.
  std::string secret;
  int world = 0;
};

// What the caller must do after a JobTable call. `sends` are in decision
// order, and a worker must receive its messages in that order.
struct Decisions {
  std::vector<WorkerSend> sends;
  std::vector<ShardEndJob> shard_end_jobs;
  bool events_changed = false;  // a job's events or state changed: wake watchers
};

// A WatchJob stream's position in one job's events.
struct WatchCursor {
  size_t next_event = 0;      // index into the STATE / EPOCH log
  int64_t seen_progress = 0;  // progress_seq of the last PROGRESS sent
  int64_t seen_seq = -1;      // the job's seq when last read
};

struct JobTableOptions {
  // PS shard addresses in shard order; a job with ps_shards = S uses the
  // first S. Their number bounds spec.ps_shards at submission.
  std::vector<std::string> ps_addresses;
  // Job ids are "j-<id_prefix><n>", n = 1, 2, ... (after a restart, n
  // continues after the largest n in the store).
  std::string id_prefix;
  // Where jobs are saved and recovered from; nullptr: memory only. Not
  // owned; must outlive the table.
  JobStore* store = nullptr;
  JobRetention retention;
  // The key job secrets are derived from (common/grpc/job_secret.h); shared
  // with the PS shards. Null: the table generates one (then only a shard in
  // this process can verify them).
  std::shared_ptr<const JobKey> job_key;
};

// The error of a job that was RUNNING when the coordinator died, with code
// UNAVAILABLE: as for a lost worker, a process the job depended on vanished
// (docs/architecture.md, Failure handling: a dead peer is UNAVAILABLE), and submitting it again may succeed.
inline constexpr char kCoordinatorRestarted[] = "coordinator restarted";

class JobTable {
 public:
  // `workers` and `env` must outlive the table. The table marks workers
  // busy, idle and dead in `workers`.
  JobTable(JobTableOptions options, WorkerRegistry* workers, const Env* env);

  JobTable(const JobTable&) = delete;
  JobTable& operator=(const JobTable&) = delete;

  // Sets a PS shard's address (shard 0 is known only once the server has
  // bound its port). Ignored for a shard index out of range.
  void SetShardAddress(int shard, const std::string& address);
  int num_ps_shards() const { return static_cast<int>(ps_addresses_.size()); }

  // Loads the store's jobs (call once, before anything else; OK without a
  // store), in their submission order:
  //   1. ended jobs come back as they were, with their events (watch, list
  //      and status show them);
  //   2. RUNNING jobs become FAILED with kCoordinatorRestarted (their workers
  //      cancelled them when their session broke), ended on their PS shards;
  //   3. QUEUED jobs are validated again against this server's PS shards and
  //      queued in their old order (a spec that no longer fits FAILS with
  //      the reason); they are placed when workers register;
  //   4. the id counter continues after the largest stored id.
  // Every change is saved. The store's error (e.g. DATA_LOSS) when it cannot
  // be read; the table is then unusable.
  absl::Status Recover(Decisions* out);

  // Validates `spec` (ValidateJobSpec, defaults filled in), parses its model
  // once, queues the job and schedules. Returns the job as queued (or as
  // placed, when workers were idle). INVALID_ARGUMENT naming the field for a
  // bad spec; nothing is queued then. The store's error when the queued job
  // cannot be saved; nothing is queued then either. A spec with resume_from
  // needs that job known here (NOT_FOUND) and ended (FAILED_PRECONDITION);
  // its checkpoints are found by the workers on the PS shards.
  absl::StatusOr<v1::Job> Submit(const v1::JobSpec& spec, Decisions* out);

  // Places queued jobs that fit the idle workers, oldest first, with backfill
  // (see kMaxBackfillPasses). The caller runs it after a worker registers;
  // the table runs it itself after every submission, JobDone, cancellation
  // and lost worker.
  void Schedule(Decisions* out);

  // Cancels a queued or running job (a running job's workers get Cancel and
  // become idle when they report JobDone). A CANCELLED job is returned as it
  // is. NOT_FOUND for an unknown id; FAILED_PRECONDITION for a job that
  // already SUCCEEDED or FAILED.
  absl::StatusOr<v1::Job> Cancel(const std::string& id, Decisions* out);

  // Reports from a worker's session. A report whose (job, rank) does not
  // belong to `worker_id` is ignored.
  void HandleProgress(const std::string& worker_id, const v1::WorkerMessage::Progress& p,
                      Decisions* out);
  void HandleEpochDone(const std::string& worker_id,
                       const v1::WorkerMessage::EpochDone& d, Decisions* out);
  void HandleJobDone(const std::string& worker_id, const v1::WorkerMessage::JobDone& d,
                     Decisions* out);
  // A running job's rank waits past the stall threshold (or such a wait
  // ended): appends a STALL event and sets the rank's line of Job.stalls.
  void HandleStall(const std::string& worker_id, const v1::WorkerMessage::Stall& s,
                   Decisions* out);

  // Marks a live worker dead; its running job fails with UNAVAILABLE naming
  // the worker, its rank and `why` (an elastic job re-forms instead). No-op
  // for an unknown or dead worker.
  void WorkerLost(const std::string& worker_id, const std::string& why, Decisions* out);

  // Fails running jobs whose held symptom error is kSymptomGrace old (an
  // elastic job re-forms instead); places re-forming jobs whose survivors
  // did not stop within kSurvivorWait, and fails those that waited
  // spec.elastic_wait_ms for min_workers.
  void ExpireSymptoms(Decisions* out);

  // The job, or nullptr for an unknown id.
  const v1::Job* Find(const std::string& id) const;

  // Every job in submission order.
  std::vector<const v1::Job*> Jobs() const;

  // True when job `id` changed since `cursor` last read it (false for an
  // unknown id).
  bool HasNews(const std::string& id, const WatchCursor& cursor) const;

  // Job `id` with its curves and per-rank progress (job_curves.h), for the
  // dashboard; the result's traces are left out (and not copied). Not const:
  // the traces are moved aside while the job is copied. NOT_FOUND for an
  // unknown id.
  absl::StatusOr<JobLive> Live(const std::string& id);
  // Every job (traces left out, as in Live) with its latest curve point only
  // and no ranks, in submission order, but of the ended ones only the
  // `max_ended` that ended last.
  std::vector<JobLive> Listing(size_t max_ended);

  // Appends to `events` what `cursor` has not seen of job `id` (the latest
  // PROGRESS if newer, then STATE / EPOCH events in order) and advances it.
  // Returns whether the job has ended; NOT_FOUND for an unknown id.
  absl::StatusOr<bool> ReadEvents(const std::string& id, WatchCursor* cursor,
                                  std::vector<v1::JobEvent>* events) const;

 private:
  // A copy of e's job without the result's traces (moved aside meanwhile).
  static v1::Job CopyWithoutTraces(JobEntry* e);

  int64_t NowMs() const;
  // Retention::PruneEnded on the table's order. Called at the end of every
  // public method that may end a job, when no JobEntry* is held.
  void PruneEnded() { retention_.PruneEnded(&job_order_); }
  // Schedule without pruning (for callers that still hold a JobEntry*).
  void Reschedule(Decisions* out);
  JobEntry* Entry(const std::string& id);
  const JobEntry* Entry(const std::string& id) const;
  // The running-or-ended job `id` if `worker_id` holds `rank` in it.
  JobEntry* RankEntry(const std::string& id, int rank, const std::string& worker_id);
  // Appends a STATE event and saves the job (a failed save is logged; the
  // next save of the job retries its events).
  void AddStateEvent(JobEntry* e, const std::string& message, Decisions* out);
  void AppendStateEvent(JobEntry* e, const std::string& message, Decisions* out);
  // Sets Job.waiting_for of every queued job ("needs N workers, R
  // registered, I idle") and, when it changed, records it as a STATE event
  // (watch shows it).
  void SayWhatQueuedJobsWaitFor(Decisions* out);
  // JobHistory::Save (OK without a store; an error is logged there).
  absl::Status Save(JobEntry* e) { return history_.Save(e); }
  // Recover's steps for one stored job.
  // OK when `old` is empty or a known job that has ended (Submit).
  absl::Status CheckResumable(const std::string& old) const;
  void Restore(StoredJob stored, Decisions* out);
  void RequeueRestored(JobEntry* e, Decisions* out);
  // Elastic jobs (job_table_elastic.cc). Ends e's running generation
  // because of `why` (naming `lost_worker` at `lost_rank`, or "" and -1):
  // its live ranks are cancelled, its PS slices ended, and the job waits
  // for the next generation's workers (PlaceReforming). Fails the job
  // instead after kMaxGenerations.
  void Reform(JobEntry* e, const std::string& why, const std::string& lost_worker,
              int lost_rank, Decisions* out);
  // Places every re-forming job that can go on: once its survivors stopped
  // (or kSurvivorWait passed), on min(workers, idle) >= min_workers idle
  // workers. True while one still waits (nothing queued may start then).
  bool PlaceReforming(Decisions* out);
  // Fails re-forming jobs that waited spec.elastic_wait_ms.
  void ExpireReforming(Decisions* out);
  // A running elastic job below spec.workers whose rank 0 just passed a
  // commit boundary while workers are idle re-forms to take them in.
  void MaybeScaleUp(JobEntry* e, int64_t previous_step,
                    const v1::WorkerMessage::Progress& p, Decisions* out);
  // Rank 0's first report of a generation (Generations::Commit): logged,
  // recorded and saved.
  void GenerationReported(JobEntry* e, const v1::WorkerMessage::Progress& p);
  // JobDone of a rank of an ended generation (fenced):
  // Generations::EndedRankDone.
  void EndedGenerationDone(const std::string& worker_id,
                           const v1::WorkerMessage::JobDone& d);
  // Places `e` on `picked` (spec.workers idle workers, rank order; fewer for
  // an elastic job's later generation).
  void Place(JobEntry* e, const std::vector<const RegisteredWorker*>& picked,
             Decisions* out);
  // A PS training job that names no partition size gets one when it is
  // first placed, written into its spec, so that its record, every later
  // generation, its results and a resumed copy cut alike:
  // PickPsPartitionBytes (common/ps_layout.h) for the model's size and
  // whether the `picked` workers share one host (a TorchScript model's size
  // only its workers know: on one host it gets kPreferredPsPartitionBytes,
  // otherwise it keeps 0 and the workers pick for several hosts).
  static void PickPsPartitions(JobEntry* e,
                               const std::vector<const RegisteredWorker*>& picked);
  v1::Assignment MakeAssignment(const JobEntry& e,
                                const std::vector<const RegisteredWorker*>& picked) const;
  // Ends a queued or running job with `state` and `status` (OK for
  // SUCCEEDED): cancels its unfinished live workers and ends it on its PS
  // shards when it was running. No-op for an ended job.
  void EndJob(JobEntry* e, v1::JobState state, const absl::Status& status,
              Decisions* out);
  // Cancels the running generation's unfinished live ranks (Cancel with its
  // data-plane id and `reason`) and, when `end_on_shards`, ends it on its PS
  // shards: what ending a job and ending a generation share.
  void StopGeneration(JobEntry* e, const std::string& reason, bool end_on_shards,
                      Decisions* out);
  // Rank p.rank()'s compute per step into the job's StragglerWatch; a rank
  // it names becomes a STRAGGLER event.
  void StragglerReported(JobEntry* e, const v1::WorkerMessage::Progress& p,
                         Decisions* out);
  static void SetSlowestRank(const JobEntry* e, const StragglerWatch::Lag& slow,
                             v1::SlowestRank* out);
  // The result's slowest rank over the whole run, from the ranks' JobDone
  // (none for one rank).
  static void SetWholeRunSlowestRank(JobEntry* e);
  // A `kind` event of e's job at `step`, its state and total steps filled in.
  static v1::JobEvent NewEvent(const JobEntry* e, v1::JobEvent::Kind kind, int64_t step);
  // Appends `ev` to e's events where retention leaves room; a change either way.
  void AddEvent(JobEntry* e, v1::JobEvent ev);
  void CheckInitChecksum(JobEntry* e, const v1::WorkerMessage::Progress& p,
                         Decisions* out);
  void UpdateProgressEvent(JobEntry* e, const v1::WorkerMessage::Progress& p,
                           Decisions* out);
  void RankFailed(JobEntry* e, const std::string& worker_id,
                  const v1::WorkerMessage::JobDone& d, Decisions* out);
  // Builds the result once every rank reported success: means over ranks,
  // then the final parameter checksums (CheckFinalChecksums); bench jobs:
  // MergeBenchResults (bench_merge.h).
  void Finalize(JobEntry* e, Decisions* out);
  // Ranks that must end with equal parameters do: ring replicas, ps-sync
  // ranks (all take the last step's answer), ps-async ranks (all end with a
  // final pull after every rank's last push). DATA_LOSS naming the ranks
  // that disagree with rank 0 (after `what`), else OK.
  static absl::Status CheckFinalChecksums(const v1::JobResult& result,
                                          const std::string& what);
  // job_table_secret.cc: `key`, or a fresh one (null if urandom failed).
  static std::shared_ptr<const JobKey> KeyOrNew(std::shared_ptr<const JobKey> key);
  // The job's data-plane secret ("" without a key).
  std::string SecretOf(const std::string& job_id, int world) const;
  // Sets a's job secret, and the resumed job's when spec.resume_from is set.
  void AddSecrets(const JobEntry& e, v1::Assignment* a) const;
  // Floats per rank of the job's assignment: the model's parameters, or for
  // a bench job the largest size / 4.
  static size_t NumParamsOf(const JobEntry& e);
  // The MLP a job trains, parsed from its (validated) spec; empty for bench
  // jobs and TorchScript models, whose workers learn the shape themselves.
  static absl::StatusOr<MlpSpec> MlpOf(const v1::JobSpec& spec);

  const std::string id_prefix_;
  std::shared_ptr<const JobKey> job_key_;  // null only if urandom failed
  WorkerRegistry* const workers_;
  const Env* const env_;
  std::vector<std::string> ps_addresses_;
  JobEntries jobs_;
  std::vector<std::string> job_order_;  // submission order
  JobHistory history_;
  Retention retention_;                // over jobs_ and history_
  JobQueue queue_;                     // QUEUED jobs, over jobs_
  std::deque<std::string> reforming_;  // elastic jobs between generations
  int64_t next_job_ = 1;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_JOB_TABLE_H_
