// Integration: checkpoints of allreduce-sync and ps-async jobs with real
// daemons. As checkpoint_integration_test.cc: the server (coordinator and
// PS shard 0, which keeps allreduce checkpoints too) is killed mid-job and
// restarted, and `--resume` of the failed job finishes it.
//  - ring sync: bit-identical to an uninterrupted run (rank 0's parameters
//    and Adam state come back on every rank, the data order is the step's);
//  - ps async: no bit-identity (arrival order decides), but the resumed job
//    succeeds from its checkpoint and reaches a similar accuracy;
//  - a damaged allreduce checkpoint fails the resumed job with DATA_LOSS naming
//    the file.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/integration/checkpoint_util.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

constexpr int64_t kRingSteps = 120;
constexpr int64_t kRingEvery = 7;

TEST(ResumeFromCheckpoint, ResumedRingJobMatchesAnUninterruptedRun) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  CheckpointCleanup cleanup{c};
  ExpectResumeIsBitIdentical(c, CheckpointedSpec("ring", "sync", kRingSteps, kRingEvery));
}

TEST(ResumeFromCheckpoint, ResumedPsAsyncJobSucceedsFromItsCheckpoint) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  CheckpointCleanup cleanup{c};
  v1::Job straight, resumed;
  ASSERT_NO_FATAL_FAILURE(RunStraightAndResumed(
      c, CheckpointedSpec("ps", "async", kRingSteps, kRingEvery), &straight, &resumed));
  // Resumed slices refuse pushes of any step but their checkpoint's, so
  // success means the workers started there (not at 0).
  // Its accuracy is not broken: well above chance (0.1) and near the
  // uninterrupted run's. Async arrival order alone moves a 120-step run's
  // accuracy by several points (0.80 against 0.72 was seen under a loaded
  // full ctest), so "near" is 0.12, not a bit-identity.
  const double a = straight.result().test_accuracy();
  const double b = resumed.result().test_accuracy();
  EXPECT_GT(a, 0.5);
  EXPECT_GT(b, 0.5);
  EXPECT_NEAR(b, a, 0.12) << "uninterrupted " << a << ", resumed " << b;
}

TEST(ResumeFromCheckpoint, CorruptRingCheckpointFailsTheJobNamingTheFile) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  CheckpointCleanup cleanup{c};
  v1::JobSpec spec = CheckpointedSpec("ring", "sync", 30, kRingEvery);
  spec.set_model("mlp:784-64-10");
  std::string dir, error;
  ASSERT_NO_FATAL_FAILURE(ResumeFromCorruptCheckpoints(c, spec, &dir, &error));
  // The one piece (r0) of the newest checkpoint, step 28.
  EXPECT_NE(error.find(absl::StrCat(dir, "/r0-28.ckpt")), std::string::npos) << error;
}

}  // namespace
}  // namespace gradsync
