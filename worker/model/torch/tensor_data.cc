#include "worker/model/torch/tensor_data.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/unpickler.h>
#include <torch/script.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gradsync {
namespace {

constexpr int kMaxClasses = 256;  // labels are bytes (Dataset::labels)
// Memory a data file's values may take per byte of the file: float32 inputs
// from bytes grow 4x (plus 1 MiB for a tiny file's fixed costs).
constexpr int64_t kTensorDataExpansion = 4;

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("data file ", path, ": ", what));
}

std::string TensorShapeText(const at::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]");
}

// The file's bytes for libtorch's zip reader. torch::jit::pickle_load reads
// through an adapter that copies whatever range the zip's directory names,
// so a file whose directory points past its end made it read out of bounds
// (found by fuzz_tensor_data); this one copies only what is there and
// reports a short read, which the reader turns into an error.
class BoundedReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BoundedReader(std::string bytes) : bytes_(std::move(bytes)) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<uint64_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::string bytes_;
};

// The bytes each storage record of a file really holds, by the address of
// its data (ReadData).
using RecordSizes = std::map<const void*, size_t>;

// What torch::jit::readArchiveAndTensors("data", "", "", ...) does (the
// pickle "data.pkl", storages "data/<key>"), with a record reader that notes
// each record's size: libtorch 1.13 gives a storage the size the pickle
// declares over the record's bytes as read, so a record shorter than its
// declaration makes a storage that claims bytes it does not have (found by
// fuzz_tensor_data).
c10::IValue ReadData(caffe2::serialize::PyTorchStreamReader& reader, RecordSizes* sizes) {
  at::DataPtr pickle;
  size_t pickle_size = 0;
  std::tie(pickle, pickle_size) = reader.getRecord("data.pkl");
  const char* bytes = static_cast<const char*>(pickle.get());
  size_t done = 0;
  auto next = [&](char* buffer, size_t len) -> size_t {
    if (done >= pickle_size) return 0;
    len = std::min(pickle_size - done, len);
    std::memcpy(buffer, bytes + done, len);
    done += len;
    return len;
  };
  auto record = [&](const std::string& name) {
    at::DataPtr data;
    size_t size = 0;
    std::tie(data, size) = reader.getRecord("data/" + name);
    (*sizes)[data.get()] = size;
    return data;
  };
  torch::jit::Unpickler unpickler(next, nullptr, nullptr, record, c10::nullopt);
  unpickler.set_version(reader.version());
  return unpickler.parse_ivalue();
}

// Whether every element t's sizes and strides name lies inside its storage,
// and the storage inside the record it was read from. A pickled tensor is
// rebuilt from a storage, an offset, sizes and strides as the file gives
// them, and libtorch does not check that they agree: a file whose tensor
// claims more elements than its storage holds, or whose storage claims more
// bytes than its record holds, made reading it run off the end of the
// allocation (found by fuzz_tensor_data).
absl::Status CheckInsideStorage(const std::string& path, const std::string& what,
                                const at::Tensor& t, const RecordSizes& records) {
  if (t.layout() != at::kStrided || t.is_quantized() || !t.device().is_cpu()) {
    return Bad(path, absl::StrCat(what, " is not a plain dense CPU tensor"));
  }
  if (t.numel() == 0) return absl::OkStatus();
  if (!t.has_storage()) return Bad(path, absl::StrCat(what, " has no storage"));
  // The last element's index, in elements from the storage's start; every
  // term is checked so that a hostile size or stride cannot wrap it around.
  constexpr int64_t kLimit = int64_t{1} << 62;
  int64_t last = t.storage_offset();
  bool ok = last >= 0 && last < kLimit;
  for (int64_t d = 0; ok && d < t.dim(); ++d) {
    const int64_t size = t.size(d);
    const int64_t stride = t.stride(d);
    ok =
        size >= 1 && stride >= 0 && (stride == 0 || size - 1 <= (kLimit - last) / stride);
    if (ok) last += (size - 1) * stride;
  }
  const int64_t item = static_cast<int64_t>(t.element_size());
  const auto record = records.find(t.storage().data());
  const int64_t have =
      record == records.end()
          ? 0
          : static_cast<int64_t>(std::min(t.storage().nbytes(), record->second));
  if (!ok || last >= kLimit / item || (last + 1) * item > have) {
    return Bad(
        path, absl::StrCat(what, " ", TensorShapeText(t), " claims more values than the ",
                           have, " bytes stored for it"));
  }
  return absl::OkStatus();
}

// x [N, ...] and y [N] as a Dataset; `name` says which pair in errors.
// Refuses, before it allocates anything, a pair whose float32 inputs and
// byte labels would take more than `*budget` bytes, and takes what they take
// off `*budget`.
absl::StatusOr<Dataset> ToDataset(const std::string& path, const std::string& name,
                                  const at::Tensor& x, const at::Tensor& y,
                                  const RecordSizes& records, int64_t* budget) {
  absl::Status inside = CheckInsideStorage(path, name + " inputs", x, records);
  if (inside.ok()) inside = CheckInsideStorage(path, name + " labels", y, records);
  if (!inside.ok()) return inside;
  if (x.dim() < 1 || x.size(0) < 1) {
    return Bad(path,
               absl::StrCat(name, " inputs ", TensorShapeText(x), " hold no samples"));
  }
  if (y.dim() != 1 || y.size(0) != x.size(0)) {
    return Bad(path,
               absl::StrCat(name, " labels ", TensorShapeText(y), " do not match inputs ",
                            TensorShapeText(x), " (want one label per sample)"));
  }
  if (at::isFloatingType(y.scalar_type()) || y.scalar_type() == at::kBool ||
      at::isComplexType(y.scalar_type())) {
    return Bad(path, absl::StrCat(name, " labels are ", c10::toString(y.scalar_type()),
                                  "; want integer classes"));
  }
  if (at::isComplexType(x.scalar_type())) {
    return Bad(path, absl::StrCat(name, " inputs are complex"));
  }
  const int64_t lo = y.min().item<int64_t>();
  const int64_t hi = y.max().item<int64_t>();
  if (lo < 0 || hi >= kMaxClasses) {
    return Bad(path, absl::StrCat(name, " labels span [", lo, ", ", hi,
                                  "]; want classes in [0, ", kMaxClasses, ")"));
  }
  // numel is at most the storage's elements (CheckInsideStorage) times the
  // repeats strides of 0 allow: compare in floating point, no overflow.
  const double bytes =
      static_cast<double>(x.numel()) * 4.0 + static_cast<double>(y.numel());
  if (bytes > static_cast<double>(*budget)) {
    return Bad(path, absl::StrCat(name, " inputs ", TensorShapeText(x), " would take ",
                                  static_cast<int64_t>(bytes),
                                  " bytes in memory, over 4 per byte of the file (",
                                  kTensorDataExpansion,
                                  "x, float32 from bytes): tensors that repeat their "
                                  "values (expand, stride 0) are refused; save them "
                                  "materialised (.contiguous())"));
  }
  *budget -= static_cast<int64_t>(bytes);
  Dataset d;
  d.n = x.size(0);
  const int64_t features = x.numel() / d.n;
  if (features < 1 || features > (1 << 24)) {
    return Bad(path, absl::StrCat(name, " inputs ", TensorShapeText(x), ": ", features,
                                  " values per sample, want 1 .. 2^24"));
  }
  d.features = static_cast<int>(features);
  d.classes = static_cast<int>(hi + 1);
  at::Tensor xf = x.reshape({d.n, features}).to(at::kFloat).contiguous();
  d.images.assign(xf.data_ptr<float>(), xf.data_ptr<float>() + xf.numel());
  at::Tensor yb = y.to(at::kByte).contiguous();
  d.labels.assign(yb.data_ptr<uint8_t>(), yb.data_ptr<uint8_t>() + yb.numel());
  return d;
}

// The rows [begin, end) of d.
Dataset Rows(const Dataset& d, int64_t begin, int64_t end) {
  Dataset out;
  out.n = end - begin;
  out.features = d.features;
  out.classes = d.classes;
  out.images.assign(d.images.begin() + begin * d.features,
                    d.images.begin() + end * d.features);
  out.labels.assign(d.labels.begin() + begin, d.labels.begin() + end);
  return out;
}

}  // namespace

absl::StatusOr<TensorData> LoadTensorData(const std::string& path, const Env* env) {
  absl::StatusOr<std::string> read = env->ReadFileToString(path);
  if (!read.ok()) {
    if (absl::IsNotFound(read.status())) {
      return absl::NotFoundError(absl::StrCat("data file ", path, " not found"));
    }
    return absl::Status(read.status().code(),
                        absl::StrCat("data file: ", read.status().message()));
  }
  const size_t file_bytes = read->size();
  try {
    // What torch::jit::pickle_load does, through BoundedReader.
    caffe2::serialize::PyTorchStreamReader reader(
        std::make_shared<BoundedReader>(*std::move(read)));
    RecordSizes records;
    c10::IValue v = ReadData(reader, &records);
    if (!v.isGenericDict()) {
      return Bad(path, absl::StrCat("holds a ", v.tagKind(),
                                    ", not a dict {\"x\": ..., \"y\": ...}"));
    }
    c10::Dict<c10::IValue, c10::IValue> dict = v.toGenericDict();
    auto tensor = [&](const char* key) -> absl::StatusOr<at::Tensor> {
      auto it = dict.find(c10::IValue(std::string(key)));
      if (it == dict.end()) return absl::NotFoundError(key);
      if (!it->value().isTensor()) {
        return Bad(path, absl::StrCat("\"", key, "\" is a ", it->value().tagKind(),
                                      ", not a tensor"));
      }
      return it->value().toTensor();
    };
    absl::StatusOr<at::Tensor> x = tensor("x");
    absl::StatusOr<at::Tensor> y = tensor("y");
    if (!x.ok() || !y.ok()) {
      const absl::Status& st = !x.ok() ? x.status() : y.status();
      if (st.code() != absl::StatusCode::kNotFound) return st;
      return Bad(path, "needs tensors \"x\" (inputs) and \"y\" (labels)");
    }
    // A file's values may grow 4x (float32 from bytes), no more: a small
    // file of expanded (stride-0) tensors must not take gigabytes.
    int64_t budget = static_cast<int64_t>(file_bytes) * kTensorDataExpansion + (1 << 20);
    absl::StatusOr<Dataset> all = ToDataset(path, "training", *x, *y, records, &budget);
    if (!all.ok()) return all.status();
    absl::StatusOr<at::Tensor> xt = tensor("x_test");
    absl::StatusOr<at::Tensor> yt = tensor("y_test");
    TensorData out;
    if (xt.ok() && yt.ok()) {
      absl::StatusOr<Dataset> test = ToDataset(path, "test", *xt, *yt, records, &budget);
      if (!test.ok()) return test.status();
      if (test->features != all->features) {
        return Bad(path, absl::StrCat("test samples have ", test->features,
                                      " values, training samples ", all->features));
      }
      test->classes = std::max(test->classes, all->classes);
      all->classes = test->classes;
      out.train = *std::move(all);
      out.test = *std::move(test);
      return out;
    }
    if (xt.ok() != yt.ok()) return Bad(path, "has only one of \"x_test\" and \"y_test\"");
    if (all->n < 2) return Bad(path, "holds 1 sample: nothing to hold out for testing");
    const int64_t held = std::max<int64_t>(1, all->n / 10);
    out.train = Rows(*all, 0, all->n - held);
    out.test = Rows(*all, all->n - held, all->n);
    return out;
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    return Bad(path,
               absl::StrCat("not a torch.save file of tensors (want torch.save({\"x\": "
                            "X, \"y\": Y}, PATH)): ",
                            what));
  }
}

}  // namespace gradsync
