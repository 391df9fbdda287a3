#include "worker/metrics/metered_sync.h"

#include <string>
#include <utility>

#include "common/ps_layout.h"
#include "worker/sync/ps_partitions.h"

namespace gradsync {

MeteredSync::MeteredSync(std::unique_ptr<GradientSync> inner, const JobOptions* job,
                         const WorkerMetrics* metrics, const Env* env)
    : inner_(std::move(inner)),
      job_(*job),
      ps_(job->strategy == SyncStrategy::kPs),
      latency_(ps_ ? metrics->push_pull_seconds : metrics->collective_seconds),
      env_(env) {
  if (!ps_) return;
  for (size_t s = 0; s < job_.ps_shards.size(); ++s) {
    shard_sent_.push_back(metrics->ps_sent_bytes->WithLabels({std::to_string(s)}));
    shard_received_.push_back(
        metrics->ps_received_bytes->WithLabels({std::to_string(s)}));
  }
}

absl::Status MeteredSync::Initialize(const std::vector<Range>& buckets, float* params) {
  if (ps_ && !shard_sent_.empty()) {
    const int shards = static_cast<int>(shard_sent_.size());
    // As PsSync::Initialize step 1 (worker/sync/ps_sync.cc).
    const PsLayout layout = MakeJobPsLayout(job_, buckets);
    bucket_shard_bytes_.assign(buckets.size(), std::vector<double>(shards, 0));
    total_shard_bytes_.assign(shards, 0);
    for (const PsPartition& p : layout.partitions) {
      const double bytes = static_cast<double>(p.range.size * sizeof(float));
      bucket_shard_bytes_[p.bucket][p.shard] += bytes;
      total_shard_bytes_[p.shard] += bytes;
    }
  }
  absl::Status st = inner_->Initialize(buckets, params);
  if (st.ok() && ps_) {
    if (job_.rank == 0) AddPerShard(shard_sent_, total_shard_bytes_);
    AddPerShard(shard_received_, total_shard_bytes_);
  }
  return st;
}

absl::Status MeteredSync::SyncBucket(int64_t step, int bucket, float* grad,
                                     float* params) {
  const absl::Time start = env_->Now();
  absl::Status st = inner_->SyncBucket(step, bucket, grad, params);
  if (!st.ok()) return st;
  latency_->Observe(absl::ToDoubleSeconds(env_->Now() - start));
  if (ps_ && bucket >= 0 && bucket < static_cast<int>(bucket_shard_bytes_.size())) {
    AddPerShard(shard_sent_, bucket_shard_bytes_[bucket]);
    AddPerShard(shard_received_, bucket_shard_bytes_[bucket]);
  }
  return st;
}

absl::Status MeteredSync::Finish(float* params) {
  absl::Status st = inner_->Finish(params);
  if (st.ok() && ps_ && job_.mode == SyncMode::kAsync) {
    AddPerShard(shard_received_, total_shard_bytes_);
  }
  return st;
}

void MeteredSync::AddPerShard(const std::vector<Counter*>& counters,
                              const std::vector<double>& bytes) {
  for (size_t s = 0; s < counters.size() && s < bytes.size(); ++s) {
    counters[s]->Add(bytes[s]);
  }
}

}  // namespace gradsync
