// The CPU model announces a bucket as soon as backward has finished its
// layers (so communication of the last layers overlaps backward of the first
// ones), and records forward / backward-per-layer spans when traced.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "worker/model/device_model.h"

namespace gradsync {
namespace {

// Names of the events recorded so far ("backward L2", ...), without taking
// them for good.
std::vector<std::string> Names(TraceRecorder* r) {
  std::vector<std::string> names;
  for (const TraceEvent& e : r->Take()) {
    std::string n = e.name;
    if (e.layer >= 0) n += " L" + std::to_string(e.layer);
    names.push_back(n);
    r->Record(e);
  }
  return names;
}

TEST(CpuModelOverlap, BucketsAreReadyLayerByLayerWithSpans) {
  const MlpSpec spec{{20, 16, 8, 4}};
  auto model = MakeCpuModel(spec);
  ASSERT_TRUE(model.ok()) << model.status();
  DeviceModel& m = **model;
  // Tiny buckets: one per layer, bucket 0 = layer 2.
  const std::vector<Range> buckets = MakeBuckets(m, 4);
  ASSERT_EQ(buckets.size(), 3u);
  ASSERT_TRUE(m.Configure(buckets, OptimizerOptions{}, 2).ok());
  std::vector<float> params(m.num_params());
  Mlp(spec).InitParams(1, params.data());
  ASSERT_TRUE(m.SetParams(params.data()).ok());
  const int batch = 5;
  std::vector<float> x(batch * 20, 0.5f);
  std::vector<uint8_t> y(batch, 1);
  ASSERT_TRUE(m.StageBatch(x.data(), y.data(), batch).ok());
  TraceRecorder trace;
  m.SetTrace(&trace);
  std::vector<std::vector<std::string>> seen;  // events when bucket b ready
  ASSERT_TRUE(m.ForwardBackward(batch, [&](int b) {
                 EXPECT_EQ(b, static_cast<int>(seen.size()));
                 seen.push_back(Names(&trace));
               }).ok());
  m.SetTrace(nullptr);
  ASSERT_EQ(seen.size(), 3u);
  const std::vector<std::string> at0 = {"forward", "backward L2"};
  EXPECT_EQ(seen[0], at0);  // before backward of layers 1 and 0
  EXPECT_EQ(seen[1].size(), 3u);
  EXPECT_EQ(seen[2].size(), 4u);
  EXPECT_EQ(trace.Take().size(), 4u);
  ASSERT_TRUE(m.TakeLoss().ok());
}

}  // namespace
}  // namespace gradsync
