// worker/bench: the worker side of a bench job (JobSpec.kind = bench, run by
// `gradsync bench`): times a collective over the job's ranks, nccl-tests
// style, with the same transport and algorithms as training. No model and
// no dataset are loaded.
#ifndef GRADSYNC_WORKER_BENCH_BENCH_RUNNER_H_
#define GRADSYNC_WORKER_BENCH_BENCH_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gradsync/v1/gradsync.pb.h"
#include "worker/collectives/allreduce.h"
#include "worker/collectives/transport.h"

namespace gradsync {

class PsClient;
class TuningTable;

// Latency and bandwidth between ranks 0 and 1, measured by ping-pong, and,
// when those two share a host group, between rank 0 and the first rank of
// another group: the link a cross-host collective is bound by.
struct LinkEstimate {
  double alpha_seconds = 0;          // one message's latency
  double beta_bytes_per_second = 0;  // 0 when not measured (world size 1)
  int cross_peer = 0;                // 0: no cross-host link was measured
  double cross_alpha_seconds = 0;
  double cross_beta_bytes_per_second = 0;
};

// The rank whose link to rank 0 is measured as the cross-host link: the
// first rank of a group other than rank 0's, when rank 1 is in rank 0's
// group; 0 when there is none or rank 1 is already in another group (or
// groups has fewer than 2 ranks). groups: one host group id per rank.
int CrossHostPeer(const std::vector<int>& groups);

// Called on rank 0 after each size: `done` of `total` sizes finished.
using BenchProgressFn = std::function<void(int done, int total)>;

// Runs one rank of a bench job. Run from one thread; Abort from any thread.
class BenchRunner {
 public:
  // `a` is a validated bench assignment; `transport` connects this rank to
  // every rank of the job and must outlive the runner (pushpull also talks
  // to a.ps_shards()). `tuning` (nullptr: the built-in table) is what
  // algorithm auto runs, as for training (AllreduceOptionsFor,
  // worker/sync/ring_sync.h); it must outlive the runner.
  BenchRunner(v1::Assignment a, Transport* transport,
              const TuningTable* tuning = nullptr);
  ~BenchRunner();

  BenchRunner(const BenchRunner&) = delete;
  BenchRunner& operator=(const BenchRunner&) = delete;

  // Protocol (every rank runs the same steps in the same order):
  //  1. MeasureLink: ranks 0 and 1 ping-pong, then ranks 0 and
  //     CrossHostPeer(groups) when there is one; rank 0 broadcasts α and β
  //     of both links.
  //  2. For each size of spec.bench.sizes, in order:
  //     a. build the operation once (MakeAllreduce with spec.algorithm and
  //        AllreduceOptionsFor(a, tuning): segment_bytes = spec.chunk_bytes,
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
  // collective's error (DEADLINE_EXCEEDED after spec.step_timeout_ms when a
  // rank died, the abort status after Abort), UNIMPLEMENTED for an
  // algorithm this build lacks, INVALID_ARGUMENT for a bad assignment.
  absl::StatusOr<v1::BenchRankResult> Run(const BenchProgressFn& progress);

  // Fails a running and any later Run with `status` (non-OK). Idempotent.
  void Abort(const absl::Status& status);

  class Case;  // one operation at one size (bench_runner.cc)

 private:
  absl::StatusOr<LinkEstimate> MeasureLink();
  // α and β between rank 0 and `peer` (run by those two ranks only):
  // kSmallTries round trips of 1 float, α = median / 2; kBigTries round trips
  // of kBigBytes, β = kBigBytes / (median / 2 − α).
  absl::Status MeasurePair(int peer, float* alpha, float* beta);
  // Median round trip of `tries` ping-pongs of `count` floats between rank 0
  // and `peer` (run by those two ranks only).
  absl::StatusOr<double> PingPong(int peer, size_t count, int tries);
  absl::Status Barrier();
  absl::StatusOr<std::unique_ptr<Case>> MakeCase(int index, int64_t bytes);
  absl::StatusOr<std::unique_ptr<Case>> MakePushPullCase(int index,
                                                         size_t count);
  absl::Status WatchPs(Case* c);
  void ForgetPs();
  absl::Status CheckAborted();
  absl::StatusOr<v1::BenchRankRow> RunSize(int index, int64_t bytes);
  absl::Time Deadline() const { return absl::Now() + timeout_; }
  int64_t NextStep() { return next_step_++; }

  // Constant after construction.
  const v1::Assignment a_;
  Transport* const transport_;
  const absl::Duration timeout_;
  const TuningTable* const tuning_;
  AllreduceOptions allreduce_options_;  // set at the start of Run
  std::unique_ptr<Allreduce> barrier_;

  int64_t next_step_ = 0;  // Run's thread only: tags every collective

  absl::Mutex mu_;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  PsClient* ps_ ABSL_GUARDED_BY(mu_) = nullptr;  // pushpull: the size running
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_BENCH_BENCH_RUNNER_H_
