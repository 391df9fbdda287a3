#include "worker/model/device_model.h"

#include <algorithm>
#include <new>

#include "absl/strings/str_cat.h"

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

absl::Status DeviceModel::PredictParams(float) {
  return absl::UnimplementedError(
      absl::StrCat("the ", name(), " model does not predict parameters"));
}

absl::Status DeviceModel::RestoreParams() {
  return absl::UnimplementedError(
      absl::StrCat("the ", name(), " model does not predict parameters"));
}

}  // namespace gradsync
