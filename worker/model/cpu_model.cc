// The CPU replica of the built-in MLP (MakeCpuModel, declared in
// device_model.h): Mlp on HostModel's vectors.
#include <new>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "worker/model/device_model.h"
#include "worker/model/host_model.h"
#include "worker/model/mlp.h"

namespace gradsync {

namespace {

// The CPU replica: Mlp on host vectors. A bucket is announced as soon as
// backward has computed its layers (overlap inside a step on the CPU too).
class CpuModel final : public HostModel {
 public:
  explicit CpuModel(const MlpSpec& spec) : mlp_(spec) { AllocateHost(mlp_.num_params()); }

  std::string name() const override { return "cpu"; }
  size_t num_params() const override { return mlp_.num_params(); }
  int num_layers() const override { return mlp_.num_layers(); }
  Range LayerRange(int l) const override { return mlp_.LayerRange(l); }

  absl::Status Configure(const std::vector<Range>& buckets,
                         const OptimizerOptions& optimizer, int grad_slots) override {
    return ConfigureBuckets(buckets, optimizer, grad_slots);
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
    if (absl::Status st = CheckLossRoom(); !st.ok()) return st;
    const std::vector<Range>& buckets = optimizers().buckets();
    size_t next = 0;
    int64_t mark = trace() ? TraceRecorder::NowUs() : 0;
    Mlp::PassHooks hooks;
    hooks.forward_done = [&] { mark = TraceComputeSince(trace(), mark, "forward", -1); };
    hooks.layer_done = [&](int l) {
      mark = TraceComputeSince(trace(), mark, "backward", l);
      const size_t begin = mlp_.LayerRange(l).begin;
      for (; next < buckets.size() && buckets[next].begin >= begin; ++next) {
        bucket_ready(static_cast<int>(next));
      }
    };
    PushLoss(mlp_.ForwardBackward(params(), x_.data(), y_.data(), batch, grad(), hooks));
    for (; next < buckets.size(); ++next) bucket_ready(static_cast<int>(next));
    return absl::OkStatus();
  }

  absl::StatusOr<EvalResult> Evaluate(const float* x, const uint8_t* y,
                                      int64_t n) override {
    return mlp_.Evaluate(params(), x, y, n);
  }

 private:
  Mlp mlp_;
  std::vector<float> x_;
  std::vector<uint8_t> y_;
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
