// Integration: PS checkpoints and resume with real daemons. A ps-sync job
// checkpoints every few steps; the server (which is PS shard 0) is killed
// mid-job and restarted; `--resume` of the failed job finishes it with the
// same final parameters as a run that never stopped. A damaged checkpoint is
// refused by its checksum and the resumed job fails naming the file.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

constexpr int64_t kSteps = 300;
constexpr int64_t kEvery = 7;  // kSteps is no multiple: the last is at 294

// Two ranks (the PS sums two pushes in either order to the same bits), a
// model large enough that the job is still running when the server dies.
v1::JobSpec CheckpointedJob() {
  v1::JobSpec s = Spec("ps", "sync", 2);
  s.set_model("mlp:784-512-512-10");
  s.set_steps(kSteps);
  s.set_train_limit(4096);
  s.set_checkpoint_every(kEvery);
  s.set_step_timeout_ms(5000);
  return s;
}

v1::JobSpec ResumeOf(const v1::Job& old) {
  v1::JobSpec s = old.spec();
  s.set_resume_from(old.id());
  return s;
}

// Where the server (shard 0) keeps checkpoints of `job`.
std::string CheckpointDir(Cluster& c, const std::string& job) {
  const std::string logs =
      std::filesystem::path(c->server().log).parent_path().string();
  return absl::StrCat(logs, "/state/checkpoints/", job);
}

// Removes the cluster's checkpoints (megabytes each) when the test ends.
struct CheckpointCleanup {
  Cluster& c;
  ~CheckpointCleanup() {
    if (c.ok()) std::filesystem::remove_all(CheckpointDir(c, ""));
  }
};

v1::Job RunToEnd(Cluster& c, const v1::JobSpec& spec) {
  v1::Job job;
  EXPECT_TRUE(c.Submit(spec, &job).ok());
  return c.WaitFor(job.id(), absl::Seconds(180), Terminal);
}

TEST(Checkpoints, ResumedPsJobMatchesAnUninterruptedRun) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  CheckpointCleanup cleanup{c};
  const v1::Job straight = RunToEnd(c, CheckpointedJob());
  ASSERT_EQ(straight.state(), v1::SUCCEEDED) << straight.error();
  ASSERT_EQ(straight.result().param_checksums_size(), 2);

  v1::Job cut;
  ASSERT_TRUE(c.Submit(CheckpointedJob(), &cut).ok());
  cut = c.WaitFor(cut.id(), absl::Seconds(60), [](const v1::Job& j) {
    return Terminal(j) || (j.state() == v1::RUNNING && j.step() >= 3 * kEvery);
  });
  ASSERT_EQ(cut.state(), v1::RUNNING) << "job ended before the kill; "
                                      << cut.error();
  ASSERT_LT(cut.step(), kSteps - kEvery) << "too fast to interrupt";
  ASSERT_TRUE(c->RestartServer().ok());  // kills the coordinator and shard 0
  ASSERT_TRUE(c.Get(cut.id(), &cut).ok());
  EXPECT_EQ(cut.state(), v1::FAILED);
  EXPECT_EQ(cut.error(), "coordinator restarted");

  const v1::Job resumed = RunToEnd(c, ResumeOf(cut));
  ASSERT_EQ(resumed.state(), v1::SUCCEEDED) << resumed.error();
  EXPECT_EQ(resumed.spec().resume_from(), cut.id());
  // Bit-identical parameters: the same checksum on both ranks as the
  // uninterrupted run (so within any tolerance, 1e-6 included).
  ASSERT_EQ(resumed.result().param_checksums_size(), 2);
  EXPECT_EQ(resumed.result().param_checksums(0),
            straight.result().param_checksums(0));
  EXPECT_EQ(resumed.result().param_checksums(1),
            straight.result().param_checksums(1));
  // It started from a checkpoint, not from the seed's parameters.
  EXPECT_NE(resumed.result().init_checksum(), straight.result().init_checksum());
}

TEST(Checkpoints, CorruptCheckpointIsRefusedAndTheJobFailsNamingIt) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  CheckpointCleanup cleanup{c};
  v1::JobSpec spec = CheckpointedJob();
  spec.set_model("mlp:784-64-10");
  spec.set_steps(30);
  const v1::Job old = RunToEnd(c, spec);
  ASSERT_EQ(old.state(), v1::SUCCEEDED) << old.error();
  const std::string dir = CheckpointDir(c, old.id());
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
    ++files;
  }
  ASSERT_GT(files, 0) << "no checkpoint files in " << dir;

  const v1::Job resumed = RunToEnd(c, ResumeOf(old));
  ASSERT_EQ(resumed.state(), v1::FAILED);
  EXPECT_EQ(resumed.error_code(), static_cast<int>(absl::StatusCode::kDataLoss))
      << resumed.error();
  // One of the job's partitions' files (p0, p1, ...) at step 28.
  const size_t at = resumed.error().find(absl::StrCat(dir, "/p"));
  ASSERT_NE(at, std::string::npos) << resumed.error();
  EXPECT_NE(resumed.error().find("-28.ckpt", at), std::string::npos)
      << resumed.error();
  EXPECT_NE(resumed.error().find("corrupt"), std::string::npos) << resumed.error();
}

}  // namespace
}  // namespace gradsync
