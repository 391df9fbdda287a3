// A GradientSync that measures the one it wraps: the latency of every
// SyncBucket call (one bucket's allreduce for ring strategies, one bucket's
// push and pull for ps strategies) and, for ps strategies, the tensor bytes
// exchanged with each PS shard.
#ifndef GRADSYNC_WORKER_METRICS_METERED_SYNC_H_
#define GRADSYNC_WORKER_METRICS_METERED_SYNC_H_

#include <memory>
#include <vector>

#include "common/env.h"
#include "common/spec/job_options.h"
#include "worker/metrics/worker_metrics.h"
#include "worker/sync/gradient_sync.h"

namespace gradsync {

// Threading: as GradientSync's (the decorator adds no state that two of its
// methods share concurrently: the per-bucket byte table is written in
// Initialize, before any SyncBucket).
//
// PS bytes are not observed on the wire: they are the float payload of the
// layout that PsSync uses (MakePsLayout over the same buckets, shards and
// partition size, common/ps_layout.h), counted per call that succeeded:
//  - Initialize: rank 0 sends every partition to its shard (Init); every
//    rank receives every partition (the initial pull);
//  - SyncBucket(b): every partition of bucket b is sent and received once;
//  - Finish (async mode only): every partition is received (final pull).
class MeteredSync final : public GradientSync {
 public:
  // `job`, `metrics` and `env` (the latencies' clock) must outlive this.
  MeteredSync(std::unique_ptr<GradientSync> inner, const JobOptions* job,
              const WorkerMetrics* metrics, const Env* env = Env::Default());

  absl::Status Initialize(const std::vector<Range>& buckets, float* params) override;
  absl::Status SyncBucket(int64_t step, int bucket, float* grad, float* params) override;
  absl::Status Finish(float* params) override;
  void Abort(const absl::Status& status) override { inner_->Abort(status); }
  Output output() const override { return inner_->output(); }
  int pipeline_depth() const override { return inner_->pipeline_depth(); }
  bool identity() const override { return inner_->identity(); }
  std::vector<AllreduceAlgorithm> bucket_algorithms() const override {
    return inner_->bucket_algorithms();
  }
  int64_t start_step() const override { return inner_->start_step(); }
  AllreduceCheckpointer* checkpointer() override { return inner_->checkpointer(); }
  int64_t JobPushesApplied() const override { return inner_->JobPushesApplied(); }

 private:
  // Adds bytes[s] to counters[s].
  static void AddPerShard(const std::vector<Counter*>& counters,
                          const std::vector<double>& bytes);

  const std::unique_ptr<GradientSync> inner_;
  const JobOptions& job_;
  const bool ps_;
  Histogram* const latency_;
  const Env* const env_;
  std::vector<Counter*> shard_sent_;      // ps: by shard
  std::vector<Counter*> shard_received_;  // ps: by shard
  // ps, set in Initialize: bytes per shard of each bucket, and of all.
  std::vector<std::vector<double>> bucket_shard_bytes_;
  std::vector<double> total_shard_bytes_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_METRICS_METERED_SYNC_H_
