#include "client/timeline.h"

#include <gtest/gtest.h>

namespace gradsync {
namespace {

v1::JobEvent State(v1::JobState s) {
  v1::JobEvent ev;
  ev.set_kind(v1::JobEvent::STATE);
  ev.set_state(s);
  return ev;
}

v1::JobEvent Progress(int64_t step, double loss) {
  v1::JobEvent ev;
  ev.set_kind(v1::JobEvent::PROGRESS);
  ev.set_state(v1::RUNNING);
  ev.set_step(step);
  ev.set_epoch(1);
  ev.set_loss(loss);
  ev.set_samples_per_second(1000);
  return ev;
}

TEST(JobTimeline, CountsFromRunningAndKeepsEachStepOnce) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  JobTimeline tl;
  tl.Add(State(v1::QUEUED), t0);  // before RUNNING: time zero not yet set
  EXPECT_TRUE(tl.empty());
  tl.Add(State(v1::RUNNING), t0 + absl::Seconds(2));
  tl.Add(Progress(0, 0.0), t0 + absl::Seconds(2.5));  // step 0: nothing done
  tl.Add(Progress(10, 2.0), t0 + absl::Seconds(3));
  tl.Add(Progress(10, 2.0), t0 + absl::Seconds(3.5));  // repeat
  tl.Add(Progress(20, 1.5), t0 + absl::Seconds(4));
  v1::JobEvent epoch;
  epoch.set_kind(v1::JobEvent::EPOCH);
  epoch.set_state(v1::RUNNING);
  epoch.mutable_epoch_result()->set_epoch(1);
  epoch.mutable_epoch_result()->set_test_accuracy(0.8);
  epoch.mutable_epoch_result()->set_train_loss(1.4);
  tl.Add(epoch, t0 + absl::Seconds(5));

  const nlohmann::json j = tl.ToJson();
  ASSERT_EQ(j["progress"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["progress"][0]["t"].get<double>(), 1.0);
  EXPECT_EQ(j["progress"][0]["step"].get<int64_t>(), 10);
  EXPECT_DOUBLE_EQ(j["progress"][1]["loss"].get<double>(), 1.5);
  ASSERT_EQ(j["epochs"].size(), 1u);
  EXPECT_DOUBLE_EQ(j["epochs"][0]["t"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(j["epochs"][0]["test_accuracy"].get<double>(), 0.8);
}

}  // namespace
}  // namespace gradsync
