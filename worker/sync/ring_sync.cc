#include "worker/sync/ring_sync.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/kernels.h"
#include "common/spec/job_spec.h"
#include "worker/collectives/ring.h"
#include "worker/collectives/transport.h"

namespace gradsync {
namespace {

// The initial broadcast waits for every rank to reach it: allow the step
// timeout plus this.
constexpr absl::Duration kBroadcastSlack = absl::Seconds(10);

// Threading: as GradientSync. The per-bucket allreduce objects are built in
// Initialize and used by the communication thread afterwards.
class RingSync final : public GradientSync {
 public:
  RingSync(const v1::Assignment* a, Transport* t)
      : a_(*a),
        transport_(t),
        depth_(a->spec().mode() == v1::SYNC_MODE_ASYNC
                   ? (a->spec().has_staleness() ? a->spec().staleness()
                                                : kDefaultRingAsyncStaleness)
                   : 0) {}

  // 1. one RingAllreduce per bucket, built once with its buffers' sizes;
  // 2. rank 0's parameters are broadcast around the ring.
  absl::Status Initialize(const std::vector<Range>& buckets,
                          float* params) override {
    buckets_ = buckets;
    rings_.clear();
    size_t n = 0;
    const RingOptions options{static_cast<size_t>(a_.spec().chunk_bytes()),
                              StepTimeout(a_.spec())};
    for (const Range& r : buckets) {
      rings_.push_back(std::make_unique<RingAllreduce>(transport_, r.size, options));
      n = std::max<size_t>(n, r.begin + r.size);
    }
    return RingBroadcast(transport_, params, n, /*root=*/0,
                         a_.spec().chunk_bytes(),
                         absl::Now() + StepTimeout(a_.spec()) + kBroadcastSlack);
  }

  absl::Status SyncBucket(int64_t step, int bucket, float* grad,
                          float*) override {
    if (bucket < 0 || bucket >= static_cast<int>(rings_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no bucket ", bucket));
    }
    const Range& r = buckets_[bucket];
    absl::Status st = rings_[bucket]->Run(grad + r.begin, step, bucket);
    if (!st.ok()) return st;
    Scale(grad + r.begin, 1.0f / transport_->size(), r.size);
    return absl::OkStatus();
  }

  absl::Status Finish(float*) override { return absl::OkStatus(); }
  void Abort(const absl::Status& status) override { transport_->Abort(status); }
  Output output() const override { return Output::kAveragedGradient; }
  int pipeline_depth() const override { return depth_; }

 private:
  // Constant after construction.
  const v1::Assignment& a_;
  Transport* const transport_;
  const int depth_;
  // Set in Initialize, then used by the communication thread only.
  std::vector<Range> buckets_;
  std::vector<std::unique_ptr<RingAllreduce>> rings_;
};

}  // namespace

std::unique_ptr<GradientSync> MakeRingSync(const v1::Assignment* assignment,
                                           Transport* transport) {
  return std::make_unique<RingSync>(assignment, transport);
}

}  // namespace gradsync
