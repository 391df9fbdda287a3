#include "worker/model/device_model.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <new>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "worker/model/bucket_optimizers.h"

namespace gradsync {

std::vector<Range> MakeBuckets(const DeviceModel& model, int64_t bucket_bytes) {
  std::vector<Range> buckets;
  const size_t limit = std::max<int64_t>(bucket_bytes, 4) / sizeof(float);
  const size_t first_limit = std::max<size_t>(
      1, std::min({static_cast<size_t>(kFirstBucketBytes / sizeof(float)),
                   model.num_params() / 4, limit}));
  for (int l = model.num_layers() - 1; l >= 0; --l) {
    const Range layer = model.LayerRange(l);
    // The back bucket is bucket 0 while there is only one.
    const size_t cap = buckets.size() == 1 ? first_limit : limit;
    if (!buckets.empty() && buckets.back().size + layer.size <= cap) {
      // Layers are laid out in order, so the earlier layer extends the
      // bucket downwards.
      buckets.back().begin = layer.begin;
      buckets.back().size += layer.size;
    } else {
      buckets.push_back(layer);
    }
  }
  return buckets;
}

int64_t TraceComputeSince(TraceRecorder* trace, int64_t since, const char* name,
                          int layer) {
  if (trace == nullptr) return 0;
  TraceEvent e;
  e.name = name;
  e.category = "compute";
  e.start_us = since;
  const int64_t now = TraceRecorder::NowUs();
  e.dur_us = now - since;
  e.layer = layer;
  trace->Record(e);
  return now;
}

absl::StatusOr<std::shared_ptr<float>> AllocHostFloats(size_t floats) {
  float* p = new (std::nothrow) float[std::max<size_t>(floats, 1)]();
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", floats, " floats of host memory"));
  }
  return std::shared_ptr<float>(p, std::default_delete<float[]>());
}

absl::Status DeviceModel::GetOptimizerState(OptimizerState*) {
  return absl::UnimplementedError(
      absl::StrCat("the ", name(), " model does not export optimizer state"));
}

absl::Status DeviceModel::SetOptimizerState(const OptimizerState&) {
  return absl::UnimplementedError(
      absl::StrCat("the ", name(), " model does not import optimizer state"));
}

namespace {

// The CPU replica: Mlp on host vectors. A bucket is announced as soon as
// backward has computed its layers (overlap inside a step on the CPU too).
constexpr size_t kMaxPendingLosses = 2;

class CpuModel final : public DeviceModel {
 public:
  explicit CpuModel(const MlpSpec& spec)
      : mlp_(spec), params_(mlp_.num_params()), grad_(mlp_.num_params()) {}

  std::string name() const override { return "cpu"; }
  size_t num_params() const override { return mlp_.num_params(); }
  int num_layers() const override { return mlp_.num_layers(); }
  Range LayerRange(int l) const override { return mlp_.LayerRange(l); }

  absl::Status Configure(const std::vector<Range>& buckets,
                         const OptimizerOptions& optimizer, int grad_slots) override {
    if (grad_slots < 1) {
      return absl::InvalidArgumentError("grad_slots must be >= 1");
    }
    buckets_ = buckets;
    return optimizers_.Configure(buckets, optimizer);
  }

  absl::Status SetParams(const float* host) override {
    std::memcpy(params_.data(), host, params_.size() * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status SetParamsRange(Range r, const float* host) override {
    std::memcpy(params_.data() + r.begin, host + r.begin, r.size * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status GetParams(float* host) override {
    std::memcpy(host, params_.data(), params_.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status StageBatch(const float* x, const uint8_t* y, int batch) override {
    const int in = mlp_.spec().widths.front();
    x_.assign(x, x + static_cast<size_t>(batch) * in);
    y_.assign(y, y + batch);
    return absl::OkStatus();
  }

  // Buckets are layer-aligned, bucket 0 = last layers: bucket b is ready
  // once backward has finished the layer where b begins, so communication of
  // the last layers overlaps backward of the first ones.
  absl::Status ForwardBackward(int batch,
                               const std::function<void(int)>& bucket_ready) override {
    if (static_cast<int>(y_.size()) != batch) {
      return absl::FailedPreconditionError("no staged batch of that size");
    }
    if (losses_.size() >= kMaxPendingLosses) {
      return absl::FailedPreconditionError("too many losses not taken");
    }
    size_t next = 0;
    int64_t mark = trace_ ? TraceRecorder::NowUs() : 0;
    Mlp::PassHooks hooks;
    hooks.forward_done = [&] { mark = TraceComputeSince(trace_, mark, "forward", -1); };
    hooks.layer_done = [&](int l) {
      mark = TraceComputeSince(trace_, mark, "backward", l);
      const size_t begin = mlp_.LayerRange(l).begin;
      for (; next < buckets_.size() && buckets_[next].begin >= begin; ++next) {
        bucket_ready(static_cast<int>(next));
      }
    };
    losses_.push_back(mlp_.ForwardBackward(params_.data(), x_.data(), y_.data(), batch,
                                           grad_.data(), hooks));
    for (; next < buckets_.size(); ++next) bucket_ready(static_cast<int>(next));
    return absl::OkStatus();
  }

  void SetTrace(TraceRecorder* trace) override { trace_ = trace; }

  absl::StatusOr<float> TakeLoss() override {
    if (losses_.empty()) return absl::FailedPreconditionError("no pending loss");
    const float loss = losses_.front();
    losses_.pop_front();
    return loss;
  }

  // The CPU copies at once, on the training thread: the gradient is final
  // when backward returns, and the next backward runs on this thread too.
  absl::Status StartGradCopy(int bucket, int, float* host) override {
    if (absl::Status st = optimizers_.CheckBucket(bucket); !st.ok()) return st;
    const Range& r = buckets_[bucket];
    std::memcpy(host, grad_.data() + r.begin, r.size * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status WaitGradCopy(int, int) override { return absl::OkStatus(); }

  absl::Status ApplyGradient(int bucket, const float* host) override {
    optimizers_.Apply(bucket, params_.data(), host);
    return absl::OkStatus();
  }
  absl::Status ApplyOwnGradient(int bucket) override {
    if (absl::Status st = optimizers_.CheckBucket(bucket); !st.ok()) return st;
    optimizers_.Apply(bucket, params_.data(), grad_.data() + buckets_[bucket].begin);
    return absl::OkStatus();
  }

  absl::StatusOr<Mlp::Eval> Evaluate(const float* x, const uint8_t* y,
                                     int64_t n) override {
    return mlp_.Evaluate(params_.data(), x, y, n);
  }

  absl::Status GetOptimizerState(OptimizerState* out) override {
    return optimizers_.Get(params_.size(), out);
  }
  absl::Status SetOptimizerState(const OptimizerState& state) override {
    return optimizers_.Set(params_.size(), state);
  }

  absl::StatusOr<std::shared_ptr<float>> AllocHost(size_t floats) override {
    return AllocHostFloats(floats);
  }

 private:
  Mlp mlp_;
  std::vector<float> params_, grad_, x_;
  std::vector<uint8_t> y_;
  std::vector<Range> buckets_;
  BucketOptimizers optimizers_;
  std::deque<float> losses_;  // of ForwardBackward calls, oldest first
  TraceRecorder* trace_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceModel>> MakeCpuModel(const MlpSpec& spec) {
  // A model too large for this machine fails the job, not the daemon.
  try {
    return std::unique_ptr<DeviceModel>(new CpuModel(spec));
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("model ", spec.ToString(), " (", NumParams(spec),
                   " parameters) does not fit in this worker's memory"));
}

}  // namespace gradsync
