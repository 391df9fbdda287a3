#include "worker/model/torch/torch_model.h"

#include <ATen/Parallel.h>
#include <torch/script.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "worker/model/host_model.h"
#include "worker/model/torch/memory_budget.h"

namespace gradsync {
namespace {

constexpr int64_t kEvalChunk = 1024;

}  // namespace

std::string TorchErrorText(absl::string_view what) {
  const std::vector<absl::string_view> lines = absl::StrSplit(what, '\n');
  constexpr absl::string_view kInterpreter =
      "The following operation failed in the TorchScript interpreter";
  if (lines.empty() || !absl::StartsWith(lines[0], kInterpreter)) {
    return std::string(lines.empty() ? what : lines[0]);
  }
  // "Traceback of TorchScript ...", frames ("  File "...", line N, in f"),
  // their code, then "RuntimeError: what failed" (maybe more lines of it,
  // and a C++ backtrace after).
  absl::string_view where, error;
  for (absl::string_view line : lines) {
    if (absl::StartsWith(line, "  File \"")) where = absl::StripAsciiWhitespace(line);
    const size_t colon = line.find(": ");
    if (error.empty() && !line.empty() && line[0] != ' ' &&
        colon != absl::string_view::npos &&
        (absl::EndsWith(line.substr(0, colon), "Error") ||
         absl::EndsWith(line.substr(0, colon), "Exception"))) {
      error = line;
    }
  }
  if (error.empty()) return std::string(lines[0]);
  return where.empty() ? std::string(error) : absl::StrCat(error, " (", where, ")");
}

absl::Status TorchError(absl::string_view context, const std::exception& e) {
  const std::string what = e.what();
  const bool oom = dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
                   absl::StrContains(what, "can't allocate memory") ||
                   absl::StrContains(what, "out of memory");
  const std::string text = absl::StrCat(context, ": ", TorchErrorText(what));
  return oom ? absl::ResourceExhaustedError(text) : absl::InvalidArgumentError(text);
}

namespace {

std::string ShapeOf(const at::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]");
}

class TorchModel final : public HostModel {
 public:
  TorchModel(torch::jit::Module module, TorchModelOptions options)
      : module_(std::move(module)), options_(std::move(options)) {}

  // Lays the parameters out flat, checks the contract, registers the hooks.
  absl::Status Init() {
    for (const at::Tensor& p : module_.parameters()) {
      if (p.scalar_type() != at::kFloat) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter ", layers_.size(), " ", ShapeOf(p), " is ",
            c10::toString(p.scalar_type()), "; gradsync trains float32 parameters"));
      }
      layers_.push_back(Range{num_params_, static_cast<size_t>(p.numel())});
      num_params_ += p.numel();
      tensors_.push_back(p);
    }
    if (tensors_.empty()) {
      return absl::InvalidArgumentError("the module has no parameters to train");
    }
    if (!module_.find_method("forward").has_value()) {
      return absl::InvalidArgumentError("the module has no forward method");
    }
    has_loss_ = module_.find_method("loss").has_value();
    AllocateHost(num_params_);
    {
      torch::NoGradGuard no_grad;
      for (size_t l = 0; l < tensors_.size(); ++l) {
        at::Tensor& p = tensors_[l];
        at::Tensor view = torch::from_blob(params() + layers_[l].begin, p.sizes(),
                                           at::TensorOptions().dtype(at::kFloat));
        view.copy_(p);
        p.set_data(view);
      }
    }
    if (absl::Status st = DryRun(); !st.ok()) return st;
    fired_.assign(tensors_.size(), 0);
    for (size_t l = 0; l < tensors_.size(); ++l) {
      tensors_[l].register_hook([this, l](const at::Tensor& g) { GradReady(l, g); });
    }
    module_.train();
    return absl::OkStatus();
  }

  std::string name() const override { return "cpu (torchscript)"; }
  size_t num_params() const override { return num_params_; }
  int num_layers() const override { return static_cast<int>(layers_.size()); }
  Range LayerRange(int l) const override { return layers_[l]; }

  absl::Status Configure(const std::vector<Range>& buckets,
                         const OptimizerOptions& optimizer, int grad_slots) override {
    // Buckets are layer-aligned (MakeBuckets): each layer lies in one.
    std::vector<int> bucket_of(layers_.size(), -1);
    std::vector<int> layers_in(buckets.size(), 0);
    for (size_t l = 0; l < layers_.size(); ++l) {
      for (size_t b = 0; b < buckets.size(); ++b) {
        const Range& r = buckets[b];
        if (layers_[l].begin >= r.begin && layers_[l].end() <= r.end()) {
          bucket_of[l] = static_cast<int>(b);
          ++layers_in[b];
          break;
        }
      }
      if (bucket_of[l] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter ", l,
                         " lies in no bucket (buckets must be "
                         "layer-aligned)"));
      }
    }
    if (absl::Status st = ConfigureBuckets(buckets, optimizer, grad_slots); !st.ok()) {
      return st;
    }
    bucket_of_ = std::move(bucket_of);
    layers_in_ = std::move(layers_in);
    return absl::OkStatus();
  }

  absl::Status StageBatch(const float* x, const uint8_t* y, int batch) override {
    if (batch < 1) return absl::InvalidArgumentError("empty batch");
    x_ = torch::from_blob(const_cast<float*>(x), {batch, options_.features},
                          at::TensorOptions().dtype(at::kFloat))
             .clone();
    y_ = torch::from_blob(const_cast<uint8_t*>(y), {batch},
                          at::TensorOptions().dtype(at::kByte))
             .to(at::kLong);
    return absl::OkStatus();
  }

  // Backward hands each parameter's gradient to GradReady as autograd
  // produces it; a bucket is announced once all its parameters are in and
  // every bucket before it has been (buckets go out in order 0, 1, ...).
  absl::Status ForwardBackward(int batch,
                               const std::function<void(int)>& bucket_ready) override {
    if (!y_.defined() || y_.size(0) != batch) {
      return absl::FailedPreconditionError("no staged batch of that size");
    }
    if (absl::Status st = CheckLossRoom(); !st.ok()) return st;
    if (!optimizers().configured()) {
      return absl::FailedPreconditionError("model not configured");
    }
    remaining_ = layers_in_;
    std::fill(fired_.begin(), fired_.end(), 0);
    next_ = 0;
    ready_ = &bucket_ready;
    int64_t mark = trace() ? TraceRecorder::NowUs() : 0;
    try {
      for (at::Tensor& p : tensors_) p.mutable_grad() = at::Tensor();
      at::Tensor loss = Loss(x_, y_);
      mark = TraceComputeSince(trace(), mark, "forward", -1);
      PushLoss(loss.item<float>());
      loss.backward();
    } catch (const std::exception& e) {
      ready_ = nullptr;
      return TorchError("the model's forward or backward failed", e);
    }
    if (absl::Status st = CheckParameters(); !st.ok()) {
      ready_ = nullptr;
      return st;
    }
    // Parameters the loss does not depend on get a zero gradient.
    for (size_t l = 0; l < layers_.size(); ++l) {
      if (!fired_[l]) {
        std::fill_n(grad() + layers_[l].begin, layers_[l].size, 0.0f);
        fired_[l] = 1;
        --remaining_[bucket_of_[l]];
      }
    }
    AnnounceReady();
    ready_ = nullptr;
    TraceComputeSince(trace(), mark, "backward", -1);
    return absl::OkStatus();
  }

  absl::StatusOr<EvalResult> Evaluate(const float* x, const uint8_t* y,
                                      int64_t n) override {
    EvalResult eval;
    double loss_sum = 0;
    try {
      torch::NoGradGuard no_grad;
      module_.eval();
      for (int64_t begin = 0; begin < n; begin += kEvalChunk) {
        const int64_t rows = std::min(kEvalChunk, n - begin);
        at::Tensor xs = torch::from_blob(
            const_cast<float*>(x) + begin * options_.features, {rows, options_.features},
            at::TensorOptions().dtype(at::kFloat));
        at::Tensor ys = torch::from_blob(const_cast<uint8_t*>(y) + begin, {rows},
                                         at::TensorOptions().dtype(at::kByte))
                            .to(at::kLong);
        at::Tensor logits = module_.forward({xs}).toTensor();
        at::Tensor loss = has_loss_ ? module_.get_method("loss")({xs, ys}).toTensor()
                                    : at::cross_entropy_loss(logits, ys);
        loss_sum += loss.item<double>() * static_cast<double>(rows);
        if (logits.dim() == 2 && logits.size(0) == rows) {
          eval.correct += logits.argmax(1).eq(ys).sum().item<int64_t>();
        }
        eval.n += rows;
      }
      module_.train();
    } catch (const std::exception& e) {
      module_.train();
      return TorchError("evaluating the model failed", e);
    }
    if (absl::Status st = CheckParameters(); !st.ok()) return st;
    eval.mean_loss = eval.n > 0 ? loss_sum / static_cast<double>(eval.n) : 0;
    return eval;
  }

 private:
  // The training loss of x, y: the module's loss method or cross-entropy.
  at::Tensor Loss(const at::Tensor& x, const at::Tensor& y) {
    if (has_loss_) return module_.get_method("loss")({x, y}).toTensor();
    return at::cross_entropy_loss(module_.forward({x}).toTensor(), y);
  }

  // One forward on two samples of zeros: the output must be class logits
  // [2, >= classes] (or the loss method a scalar).
  absl::Status DryRun() {
    try {
      torch::NoGradGuard no_grad;
      module_.eval();
      at::Tensor x = torch::zeros({2, options_.features});
      at::Tensor y = torch::zeros({2}, at::TensorOptions().dtype(at::kLong));
      c10::IValue out = module_.forward({x});
      module_.train();
      if (!out.isTensor()) {
        return absl::InvalidArgumentError(
            absl::StrCat("forward returned ", out.tagKind(), ", not a tensor of logits"));
      }
      const at::Tensor logits = out.toTensor();
      if (has_loss_) {
        at::Tensor loss = module_.get_method("loss")({x, y}).toTensor();
        if (loss.numel() != 1) {
          return absl::InvalidArgumentError(
              absl::StrCat("loss(x, y) returned ", ShapeOf(loss), ", not a scalar"));
        }
      } else if (logits.dim() != 2 || logits.size(0) != 2 ||
                 logits.size(1) < options_.classes) {
        return absl::InvalidArgumentError(
            absl::StrCat("forward of a batch of 2 samples of ", options_.features,
                         " features returned ", ShapeOf(logits),
                         "; the data's labels need logits [2, ", options_.classes,
                         "] (or define loss(x, y))"));
      }
    } catch (const std::exception& e) {
      module_.train();
      return TorchError(absl::StrCat("forward of a batch of 2 samples of ",
                                     options_.features, " features failed"),
                        e);
    }
    return absl::OkStatus();
  }

  // The module still trains the parameters Init laid out: each is the
  // float32 view of its own range of params() (a forward that swapped one
  // for another tensor, under no_grad, would leave gradsync's buffers and
  // the module's apart, and its gradient the wrong size). Checked after
  // every forward and backward.
  absl::Status CheckParameters() {
    for (size_t l = 0; l < tensors_.size(); ++l) {
      const at::Tensor& p = tensors_[l];
      if (!p.defined() || p.scalar_type() != at::kFloat ||
          p.numel() != static_cast<int64_t>(layers_[l].size) ||
          p.data_ptr() != static_cast<const void*>(params() + layers_[l].begin)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the model replaced parameter ", l, " (", layers_[l].size,
            " float32 elements when loaded) with ",
            p.defined() ? ShapeOf(p) : std::string("nothing"),
            ": a model must not change its parameters' shapes, types or storage"));
      }
    }
    return absl::OkStatus();
  }

  // Autograd's hook for parameter l (training thread, inside backward).
  // Throws (autograd hands it to backward's caller) for a gradient whose
  // size is not the parameter's as laid out: it would overrun its slot.
  void GradReady(size_t l, const at::Tensor& g) {
    if (ready_ == nullptr || fired_[l]) return;  // not our backward
    if (g.numel() != static_cast<int64_t>(layers_[l].size)) {
      throw std::runtime_error(absl::StrCat(
          "the gradient of parameter ", l, " is ", ShapeOf(g), " but the parameter had ",
          layers_[l].size,
          " elements when loaded: a model must not change its parameters' shapes"));
    }
    at::Tensor dst = torch::from_blob(grad() + layers_[l].begin, g.sizes(),
                                      at::TensorOptions().dtype(at::kFloat));
    dst.copy_(g);
    fired_[l] = 1;
    --remaining_[bucket_of_[l]];
    AnnounceReady();
  }

  void AnnounceReady() {
    const int buckets = static_cast<int>(remaining_.size());
    while (next_ < buckets && remaining_[next_] == 0) (*ready_)(next_++);
  }

  torch::jit::Module module_;
  TorchModelOptions options_;
  bool has_loss_ = false;
  std::vector<at::Tensor> tensors_;  // the module's parameters, in order
  std::vector<Range> layers_;        // parameter l's slice of the flat vector
  size_t num_params_ = 0;
  // HostModel's params() is flat; the module's parameters are views of it.
  std::vector<int> bucket_of_;  // by parameter
  std::vector<int> layers_in_;  // parameters per bucket
  // Per ForwardBackward: parameters whose gradient is in, per bucket those
  // still missing, the next bucket to announce and whom to tell.
  std::vector<char> fired_;
  std::vector<int> remaining_;
  int next_ = 0;
  const std::function<void(int)>* ready_ = nullptr;
  at::Tensor x_, y_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceModel>> MakeTorchScriptModel(
    const TorchModelOptions& options) {
  if (options.features < 1 || options.classes < 1) {
    return absl::InvalidArgumentError("the data set has no features or no classes");
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(options.path, ec)) {
    return absl::NotFoundError(absl::StrCat("model file ", options.path, " not found"));
  }
  if (options.threads > 0) at::set_num_threads(options.threads);
  // From here on the job's tensors count against its budget: loading the
  // module, the dry run, every step.
  SetTorchMemoryLimit(options.max_memory_bytes);
  std::unique_ptr<TorchModel> model;
  try {
    torch::jit::Module m = torch::jit::load(options.path, torch::kCPU);
    model = std::make_unique<TorchModel>(std::move(m), options);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model file ", options.path,
        " is not a TorchScript module (torch.jit.save): ", TorchErrorText(e.what())));
  }
  if (absl::Status st = model->Init(); !st.ok()) {
    return absl::Status(st.code(),
                        absl::StrCat("model ", options.path, ": ", st.message()));
  }
  return std::unique_ptr<DeviceModel>(std::move(model));
}

}  // namespace gradsync
