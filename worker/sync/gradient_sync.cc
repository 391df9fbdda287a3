// GradientSync implementations: parameter server (sync / async, the server
// runs the optimizer) and ring allreduce (sync / bounded-staleness async, each
// worker runs the same optimizer on the same averaged gradient).
#include "worker/sync/gradient_sync.h"

#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/kernels.h"
#include "common/optimizer.h"
#include "common/spec/job_spec.h"
#include "worker/sync/ps_client.h"
#include "worker/collectives/ring.h"

namespace gradsync {
namespace {

// ---------------------------------------------------------------- PS

class PsSync final : public GradientSync {
 public:
  explicit PsSync(const v1::Assignment& a)
      : a_(a), timeout_(StepTimeout(a.spec())) {
    (void)ConfigureBuckets({Range{0, a.num_params()}});
  }

  absl::Status ConfigureBuckets(const std::vector<Range>& buckets) override {
    std::vector<std::pair<uint64_t, uint64_t>> b;
    for (const Range& r : buckets) b.emplace_back(r.begin, r.size);
    std::vector<v1::PsShardInfo> shards(a_.ps_shards().begin(),
                                        a_.ps_shards().end());
    std::vector<PsPiece> pieces =
        MakePsPieces(a_.job_id(), shards, b, &pieces_of_bucket_);
    all_pieces_.clear();
    for (size_t i = 0; i < pieces.size(); ++i) all_pieces_.push_back(i);
    absl::MutexLock lock(&mu_);
    client_ = std::make_unique<PsClient>(a_.rank(), std::move(pieces));
    if (!aborted_.ok()) client_->Abort(aborted_);
    return absl::OkStatus();
  }

  absl::Status Initialize(float* params) override {
    // Generous: the first pull also waits for rank 0's Init.
    const absl::Time deadline = absl::Now() + timeout_ + absl::Seconds(30);
    if (a_.rank() == 0) {
      v1::ShardConfig c;
      c.set_world_size(a_.world_size());
      c.set_mode(a_.spec().mode());
      c.set_staleness(a_.spec().has_staleness() ? a_.spec().staleness() : -1);
      c.set_optimizer(a_.spec().optimizer());
      c.set_lr(a_.spec().lr());
      c.set_momentum(a_.spec().momentum());
      absl::Status st = client_->Init(params, c, deadline);
      if (!st.ok()) return st;
    }
    return client_->Pull(params, /*initial=*/true, deadline);
  }

  absl::Status Step(int64_t step, float* grad, float* params) override {
    return client_->PushPull(step, grad, params, all_pieces_,
                             absl::Now() + timeout_);
  }

  absl::StatusOr<BucketOutput> SyncBucket(int64_t step, int bucket, float* grad,
                                          float* params) override {
    if (bucket < 0 || bucket >= static_cast<int>(pieces_of_bucket_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no bucket ", bucket));
    }
    absl::Status st = client_->PushPull(step, grad, params,
                                        pieces_of_bucket_[bucket],
                                        absl::Now() + timeout_);
    if (!st.ok()) return st;
    return BucketOutput::kParameters;
  }

  int pipeline_depth() const override { return 0; }

  absl::Status Finish(float* params) override {
    if (a_.spec().mode() == v1::SYNC_MODE_ASYNC) {
      return client_->Pull(params, /*initial=*/false, absl::Now() + timeout_);
    }
    return absl::OkStatus();
  }

  void Abort(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    if (aborted_.ok()) aborted_ = status;
    if (client_) client_->Abort(status);
  }

 private:
  const v1::Assignment& a_;
  const absl::Duration timeout_;
  std::vector<std::vector<int>> pieces_of_bucket_;
  std::vector<int> all_pieces_;
  absl::Mutex mu_;  // guards replacing client_ against Abort
  std::unique_ptr<PsClient> client_;
  absl::Status aborted_;  // guarded by mu_
};

// Per-bucket ring allreduce objects shared by both ring modes.
class RingBuckets {
 public:
  RingBuckets(const v1::Assignment& a, Transport* t)
      : a_(a), transport_(t) {}

  absl::Status Configure(const std::vector<Range>& buckets) {
    buckets_ = buckets;
    rings_.clear();
    for (const Range& r : buckets) {
      rings_.push_back(std::make_unique<RingAllreduce>(
          transport_, r.size,
          RingOptions{static_cast<size_t>(a_.spec().chunk_bytes()),
                      StepTimeout(a_.spec())}));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<GradientSync::BucketOutput> Sync(int64_t step, int bucket,
                                                  float* grad) {
    if (bucket < 0 || bucket >= static_cast<int>(rings_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no bucket ", bucket));
    }
    const Range& r = buckets_[bucket];
    absl::Status st = rings_[bucket]->Run(grad + r.begin, step, bucket);
    if (!st.ok()) return st;
    Scale(grad + r.begin, 1.0f / transport_->size(), r.size);
    return GradientSync::BucketOutput::kAveragedGradient;
  }

 private:
  const v1::Assignment& a_;
  Transport* const transport_;
  std::vector<Range> buckets_;
  std::vector<std::unique_ptr<RingAllreduce>> rings_;
};

// ---------------------------------------------------------------- ring sync

class RingSync final : public GradientSync {
 public:
  RingSync(const v1::Assignment& a, Transport* t, size_t n, Optimizer opt)
      : a_(a),
        transport_(t),
        n_(n),
        ring_(t, n, RingOptions{static_cast<size_t>(a.spec().chunk_bytes()),
                                StepTimeout(a.spec())}),
        optimizer_(std::move(opt)) {}

  absl::Status Initialize(float* params) override {
    return RingBroadcast(transport_, params, n_, /*root=*/0,
                         a_.spec().chunk_bytes(),
                         absl::Now() + StepTimeout(a_.spec()) + absl::Seconds(10));
  }

  absl::Status Step(int64_t step, float* grad, float* params) override {
    absl::Status st = ring_.Run(grad, step, /*bucket=*/0);
    if (!st.ok()) return st;
    Scale(grad, 1.0f / transport_->size(), n_);
    optimizer_.Apply(params, grad);
    return absl::OkStatus();
  }

  absl::Status Finish(float*) override { return absl::OkStatus(); }
  void Abort(const absl::Status& status) override { transport_->Abort(status); }

  absl::Status ConfigureBuckets(const std::vector<Range>& b) override {
    return buckets_.Configure(b);
  }
  absl::StatusOr<BucketOutput> SyncBucket(int64_t step, int bucket, float* grad,
                                          float*) override {
    return buckets_.Sync(step, bucket, grad);
  }
  int pipeline_depth() const override { return 0; }

 private:
  const v1::Assignment& a_;
  Transport* const transport_;
  const size_t n_;
  RingAllreduce ring_;
  Optimizer optimizer_;
  RingBuckets buckets_{a_, transport_};
};

// ---------------------------------------------------------------- ring async

// Bounded staleness: the allreduce of step t runs on a communication thread
// while the training thread computes step t+1..t+s. Before step t+s+1 can
// start, the averaged gradient of step t is applied. Every rank applies the
// same averaged gradients in the same order, so replicas stay identical.
class RingAsyncSync final : public GradientSync {
 public:
  RingAsyncSync(const v1::Assignment& a, Transport* t, size_t n, Optimizer opt)
      : a_(a),
        transport_(t),
        n_(n),
        staleness_(a.spec().has_staleness() ? a.spec().staleness() : 1),
        ring_(t, n, RingOptions{static_cast<size_t>(a.spec().chunk_bytes()),
                                StepTimeout(a.spec())}),
        optimizer_(std::move(opt)),
        slots_(staleness_ + 1, std::vector<float>(n)) {
    comm_ = std::thread([this] { CommLoop(); });
  }

  ~RingAsyncSync() override {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    comm_.join();
  }

  absl::Status Initialize(float* params) override {
    return RingBroadcast(transport_, params, n_, /*root=*/0,
                         a_.spec().chunk_bytes(),
                         absl::Now() + StepTimeout(a_.spec()) + absl::Seconds(10));
  }

  absl::Status Step(int64_t step, float* grad, float* params) override {
    {
      absl::MutexLock lock(&mu_);
      if (!error_.ok()) return error_;
      std::vector<float>& slot = slots_[step % slots_.size()];
      std::memcpy(slot.data(), grad, n_ * sizeof(float));
      pending_.push_back(step);
      in_flight_.push_back(step);
    }
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (static_cast<int>(in_flight_.size()) <= staleness_) break;
      }
      absl::Status st = ApplyOldest(params);
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

  absl::Status Finish(float* params) override {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (in_flight_.empty()) return error_;
      }
      absl::Status st = ApplyOldest(params);
      if (!st.ok()) return st;
    }
  }

  void Abort(const absl::Status& status) override {
    transport_->Abort(status);
    absl::MutexLock lock(&mu_);
    if (error_.ok()) error_ = status;
  }

  // Bucketed use: the caller pipelines steps itself (pipeline_depth), so a
  // bucket is simply allreduced here, on the caller's thread.
  absl::Status ConfigureBuckets(const std::vector<Range>& b) override {
    return buckets_.Configure(b);
  }
  absl::StatusOr<BucketOutput> SyncBucket(int64_t step, int bucket, float* grad,
                                          float*) override {
    return buckets_.Sync(step, bucket, grad);
  }
  int pipeline_depth() const override { return staleness_; }

 private:
  // Waits for the oldest in-flight allreduce and applies its average.
  absl::Status ApplyOldest(float* params) {
    int64_t step;
    {
      absl::MutexLock lock(&mu_);
      step = in_flight_.front();
      auto ready = [this, step]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !error_.ok() || completed_ > step;
      };
      mu_.Await(absl::Condition(&ready));  // bounded: Run has a deadline
      if (!error_.ok()) return error_;
      in_flight_.pop_front();
    }
    std::vector<float>& slot = slots_[step % slots_.size()];
    Scale(slot.data(), 1.0f / transport_->size(), n_);
    optimizer_.Apply(params, slot.data());
    return absl::OkStatus();
  }

  void CommLoop() {
    while (true) {
      int64_t step;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return stop_ || !pending_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (pending_.empty()) return;
        step = pending_.front();
        pending_.pop_front();
      }
      absl::Status st =
          ring_.Run(slots_[step % slots_.size()].data(), step, /*bucket=*/0);
      absl::MutexLock lock(&mu_);
      if (!st.ok() && error_.ok()) error_ = st;
      completed_ = step + 1;
    }
  }

  const v1::Assignment& a_;
  Transport* const transport_;
  const size_t n_;
  const int staleness_;
  RingAllreduce ring_;  // used by the communication thread only
  Optimizer optimizer_; // training thread only
  // Slot step % (s+1) belongs to the communication thread from Step(step)
  // until completed_ > step, then to the training thread.
  std::vector<std::vector<float>> slots_;

  absl::Mutex mu_;
  std::deque<int64_t> pending_ ABSL_GUARDED_BY(mu_);    // to allreduce
  std::deque<int64_t> in_flight_ ABSL_GUARDED_BY(mu_);  // not yet applied
  int64_t completed_ ABSL_GUARDED_BY(mu_) = 0;          // steps < this done
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread comm_;
  RingBuckets buckets_{a_, transport_};
};

}  // namespace

absl::StatusOr<std::unique_ptr<GradientSync>> MakeGradientSync(
    const SyncContext& ctx) {
  const v1::Assignment& a = *ctx.assignment;
  const v1::JobSpec& spec = a.spec();
  if (spec.strategy() == v1::STRATEGY_PS) {
    if (a.ps_shards_size() == 0) {
      return absl::InvalidArgumentError("ps job without PS shards");
    }
    return std::unique_ptr<GradientSync>(new PsSync(a));
  }
  if (spec.strategy() != v1::STRATEGY_RING) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy: unknown ", StrategyName(spec.strategy())));
  }
  if (ctx.transport == nullptr) {
    return absl::InvalidArgumentError("ring job without a transport");
  }
  absl::StatusOr<Optimizer> opt =
      Optimizer::Create(OptimizerFromSpec(spec), ctx.num_params);
  if (!opt.ok()) return opt.status();
  if (spec.mode() == v1::SYNC_MODE_ASYNC) {
    return std::unique_ptr<GradientSync>(
        new RingAsyncSync(a, ctx.transport, ctx.num_params, std::move(*opt)));
  }
  return std::unique_ptr<GradientSync>(
      new RingSync(a, ctx.transport, ctx.num_params, std::move(*opt)));
}

}  // namespace gradsync
