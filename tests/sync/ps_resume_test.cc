// Where a resumed ps job starts (PickResumeStep) and which jobs the
// coordinator lets a job resume from (JobTable::Submit with resume_from).
#include "worker/sync/ps_resume.h"

#include <gtest/gtest.h>

namespace gradsync {
namespace {

TEST(PickResumeStep, LargestStepCommonToEveryShardWithSlices) {
  // Shard 2 holds no slice of the job and does not count.
  auto step = PickResumeStep("j-1", {{4, 6}, {2, 4, 6}, {}}, {2, 1, 0});
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 6);
  step = PickResumeStep("j-1", {{4, 6}, {4}}, {1, 1});
  ASSERT_TRUE(step.ok());
  EXPECT_EQ(*step, 4);  // one shard was a checkpoint behind
}

TEST(PickResumeStep, NoCheckpointIsNotFoundNamingTheJob) {
  auto step = PickResumeStep("j-7", {{}, {}}, {0, 0});
  EXPECT_TRUE(absl::IsNotFound(step.status()));
  EXPECT_NE(step.status().message().find("j-7"), std::string::npos);
  step = PickResumeStep("j-7", {{2}, {4}}, {1, 1});
  EXPECT_TRUE(absl::IsNotFound(step.status())) << step.status();
}

}  // namespace
}  // namespace gradsync
