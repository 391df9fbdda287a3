// Integration: PS checkpoints and resume with real daemons. A ps-sync job
// checkpoints every few steps; the server (which is PS shard 0) is killed
// mid-job and restarted; `--resume` of the failed job finishes it with the
// same final parameters as a run that never stopped. A damaged checkpoint is
// refused by its checksum and the resumed job fails naming the file.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/integration/checkpoint_util.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

constexpr int64_t kSteps = 120;
constexpr int64_t kEvery = 7;  // kSteps is no multiple: the last is at 119

// Two ranks: the PS sums two pushes in either order to the same bits.
v1::JobSpec CheckpointedJob() { return CheckpointedSpec("ps", "sync", kSteps, kEvery); }

TEST(Checkpoints, ResumedPsJobMatchesAnUninterruptedRun) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  CheckpointCleanup cleanup{c};
  ExpectResumeIsBitIdentical(c, CheckpointedJob());
}

TEST(Checkpoints, CorruptCheckpointIsRefusedAndTheJobFailsNamingIt) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  CheckpointCleanup cleanup{c};
  v1::JobSpec spec = CheckpointedJob();
  spec.set_model("mlp:784-64-10");
  spec.set_steps(30);
  std::string dir, error;
  ASSERT_NO_FATAL_FAILURE(ResumeFromCorruptCheckpoints(c, spec, &dir, &error));
  // One of the job's partitions' files (p0, p1, ...) at step 28.
  const size_t at = error.find(absl::StrCat(dir, "/p"));
  ASSERT_NE(at, std::string::npos) << error;
  EXPECT_NE(error.find("-28.ckpt", at), std::string::npos) << error;
}

}  // namespace
}  // namespace gradsync
