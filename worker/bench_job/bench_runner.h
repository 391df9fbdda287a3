// worker/bench_job: the worker side of a bench job (JobSpec.kind = bench, run by
// `gradsync bench`): times a collective over the job's ranks, nccl-tests
// style, with the same transport and algorithms as training. No model and
// no dataset are loaded.
#ifndef GRADSYNC_WORKER_BENCH_JOB_BENCH_RUNNER_H_
#define GRADSYNC_WORKER_BENCH_JOB_BENCH_RUNNER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/spec/job_options.h"
#include "worker/bench_job/bench_result.h"
#include "worker/collectives/allreduce_factory.h"
#include "worker/collectives/transport.h"

namespace gradsync {

class PsClient;
class TuningTable;

// The pairs of ranks whose links a bench job measures by ping-pong: ranks
// 0 and 1, which is the link between two hosts or the one inside a host as
// their groups say, and a second pair for the other kind when the groups
// have one. Between hosts: rank 0 and the first rank outside its group.
// Inside a host: rank 0 and the first rank of its group, else rank 1 and
// the first of its, else the first two ranks that share any group.
struct LinkPairs {
  std::array<int, 2> between = {-1, -1};  // {a, b}, a < b; -1: none
  std::array<int, 2> inside = {-1, -1};
};

// LinkPairs for `groups` (one host group id per rank; fewer than two
// ranks: no pairs).
LinkPairs PickLinkPairs(const std::vector<int>& groups);

// Called on rank 0 after each size: `done` of `total` sizes finished.
using BenchProgressFn = std::function<void(int done, int total)>;

// Runs one rank of a bench job. Run from one thread; Abort from any thread.
class BenchRunner {
 public:
  // `job` is a validated bench job (job.is_bench); `transport` connects this
  // rank to every rank of the job and must outlive the runner (pushpull
  // also talks to job.ps_shards). `tuning` (nullptr: the built-in table) is what
  // algorithm auto runs, as for training (AllreduceOptionsFor,
  // worker/sync/allreduce_sync.h); it must outlive the runner, and so must
  // `env` (deadlines; iterations are timed on its monotonic clock).
  BenchRunner(JobOptions job, Transport* transport, const TuningTable* tuning = nullptr,
              const Env* env = Env::Default());
  ~BenchRunner();

  BenchRunner(const BenchRunner&) = delete;
  BenchRunner& operator=(const BenchRunner&) = delete;

  // Protocol (every rank runs the same steps in the same order):
  //  1. MeasureLinks: ranks 0 and 1 ping-pong, then the other pair of
  //     PickLinkPairs(groups) when there is one; then a barrier (a rank
  //     waits for the two at most 3 step timeouts). Each pair's first rank
  //     reports its link in its result.
  //  2. For each size of job.bench.sizes, in order:
  //     a. build the operation once (MakeAllreduce with job.algorithm and
  //        AllreduceOptionsFor(job, tuning): segment_bytes = job.chunk_bytes,
  //        the step timeout, host groups; RingBroadcast from rank 0; or a
  //        PsClient over the PS shards, the vector laid out as a training
  //        bucket: MakePsLayout's partitions, round-robin);
  //     b. `warmup` untimed runs (each preceded by the refill);
  //     c. `iters` timed runs: refill the buffer (untimed), a barrier (a
  //        1-float recursive-doubling allreduce, untimed), the operation
  //        timed on this rank, then an exact check of the result (untimed).
  //     d. rank 0 calls `progress`.
  // Returns this rank's rows; a row whose result differed is ok = false
  // with the first difference in `error`. Errors (the job fails): a
  // collective's error (DEADLINE_EXCEEDED after job.step_timeout when a
  // rank died, the abort status after Abort), UNIMPLEMENTED for an
  // algorithm this build lacks.
  absl::StatusOr<BenchRankResult> Run(const BenchProgressFn& progress);

  // Fails a running and any later Run with `status` (non-OK). Idempotent.
  void Abort(const absl::Status& status);

  class Case;  // one operation at one size (bench_runner.cc)

 private:
  // Sets result's host_groups on every rank (without peer addresses: a
  // host per rank); on rank 0 alpha_seconds, beta_bytes_per_second and
  // ranks 0 and 1's link (between_hosts or inside_host, by their groups);
  // on the second pair's first rank that pair's link.
  absl::Status MeasureLinks(BenchRankResult* result);
  // α and β between ranks a and b (run by those two ranks only; each one's
  // first receive waits until `first_deadline`, later ones one step
  // timeout): kSmallTries round trips of 1 float, α = median / 2; kBigTries
  // round trips of kBigBytes, β = kBigBytes / (median / 2 − α).
  absl::Status MeasurePair(int a, int b, absl::Time first_deadline, float* alpha,
                           float* beta);
  // Median round trip of `tries` ping-pongs of `count` floats that a sends
  // and b returns; the first receive on either side waits until
  // `first_deadline`, the others one step timeout.
  absl::StatusOr<double> PingPong(int a, int b, size_t count, int tries,
                                  absl::Time first_deadline);
  absl::Status Barrier();
  absl::StatusOr<std::unique_ptr<Case>> MakeCase(int index, int64_t bytes);
  absl::StatusOr<std::unique_ptr<Case>> MakePushPullCase(int index, size_t count);
  absl::Status WatchPs(Case* c);
  void ForgetPs();
  absl::Status CheckAborted();
  absl::StatusOr<BenchRankRow> RunSize(int index, int64_t bytes);
  absl::Time Deadline() const { return env_->Now() + timeout_; }
  int64_t NextStep() { return next_step_++; }

  // Constant after construction.
  const JobOptions job_;
  Transport* const transport_;
  const absl::Duration timeout_;
  const TuningTable* const tuning_;
  const Env* const env_;
  const AllreduceOptions allreduce_options_;  // AllreduceOptionsFor(job_, tuning)
  std::unique_ptr<Allreduce> barrier_;

  int64_t next_step_ = 0;  // Run's thread only: tags every collective

  absl::Mutex mu_;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  PsClient* ps_ ABSL_GUARDED_BY(mu_) = nullptr;  // pushpull: the size running
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_BENCH_JOB_BENCH_RUNNER_H_
