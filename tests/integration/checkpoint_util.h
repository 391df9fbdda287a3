// What the checkpoint integration tests share: resuming a job, where shard
// 0 keeps its checkpoints, running a job to its end, and interrupting one
// by restarting the server (coordinator + PS shard 0) mid-job.
#ifndef GRADSYNC_TESTS_INTEGRATION_CHECKPOINT_UTIL_H_
#define GRADSYNC_TESTS_INTEGRATION_CHECKPOINT_UTIL_H_

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {

// Two ranks, a model large enough that the job is still running when the
// server dies, checkpoints every `every` steps.
inline v1::JobSpec CheckpointedSpec(const std::string& strategy, const std::string& mode,
                                    int64_t steps, int64_t every) {
  v1::JobSpec s = Spec(strategy, mode, 2);
  s.set_model("mlp:784-512-512-10");
  s.set_steps(steps);
  s.set_train_limit(4096);
  s.set_checkpoint_every(every);
  s.set_step_timeout_ms(5000);
  return s;
}

inline v1::JobSpec ResumeOf(const v1::Job& old) {
  v1::JobSpec s = old.spec();
  s.set_resume_from(old.id());
  return s;
}

// Where the server (shard 0) keeps checkpoints of `job`.
inline std::string CheckpointDir(Cluster& c, const std::string& job) {
  const std::string logs = std::filesystem::path(c->server().log).parent_path().string();
  return absl::StrCat(logs, "/state/checkpoints/", job);
}

// Removes the cluster's checkpoints (megabytes each) when the test ends.
struct CheckpointCleanup {
  Cluster& c;
  ~CheckpointCleanup() {
    if (c.ok()) std::filesystem::remove_all(CheckpointDir(c, ""));
  }
};

inline v1::Job RunToEnd(Cluster& c, const v1::JobSpec& spec) {
  v1::Job job;
  EXPECT_TRUE(c.Submit(spec, &job).ok());
  return c.WaitFor(job.id(), absl::Seconds(240), Terminal);
}

// Submits `spec`, restarts the server once the job has passed step
// `after` (but is `margin` steps from its end), and returns the job as the
// restarted coordinator reports it: FAILED with "coordinator restarted".
inline void RunAndCutOff(Cluster& c, const v1::JobSpec& spec, int64_t after,
                         int64_t margin, v1::Job* cut) {
  ASSERT_TRUE(c.Submit(spec, cut).ok());
  *cut = c.WaitFor(cut->id(), absl::Seconds(60), [after](const v1::Job& j) {
    return Terminal(j) || (j.state() == v1::RUNNING && j.step() >= after);
  });
  ASSERT_EQ(cut->state(), v1::RUNNING) << "job ended before the kill; " << cut->error();
  ASSERT_LT(cut->step(), spec.steps() - margin) << "too fast to interrupt";
  ASSERT_TRUE(c->RestartServer().ok());  // kills the coordinator and shard 0
  ASSERT_TRUE(c.Get(cut->id(), cut).ok());
  EXPECT_EQ(cut->state(), v1::FAILED);
  EXPECT_EQ(cut->error(), "coordinator restarted");
}

// Runs `spec` (two ranks) to its end, then again cut off by a server
// restart after 3 checkpoints and resumed to its end.
inline void RunStraightAndResumed(Cluster& c, const v1::JobSpec& spec, v1::Job* straight,
                                  v1::Job* resumed) {
  *straight = RunToEnd(c, spec);
  ASSERT_EQ(straight->state(), v1::SUCCEEDED) << straight->error();
  ASSERT_EQ(straight->result().param_checksums_size(), 2);
  v1::Job cut;
  const int64_t every = spec.checkpoint_every();
  ASSERT_NO_FATAL_FAILURE(RunAndCutOff(c, spec, 3 * every, every, &cut));
  *resumed = RunToEnd(c, ResumeOf(cut));
  ASSERT_EQ(resumed->state(), v1::SUCCEEDED) << resumed->error();
  EXPECT_EQ(resumed->spec().resume_from(), cut.id());
  ASSERT_EQ(resumed->result().param_checksums_size(), 2);
  // It started from a checkpoint, not from the seed's parameters.
  EXPECT_NE(resumed->result().init_checksum(), straight->result().init_checksum());
}

// Sync jobs: the resumed run ends with bit-identical parameters on both
// ranks (the same checksums; so within any tolerance, 1e-6 included).
inline void ExpectResumeIsBitIdentical(Cluster& c, const v1::JobSpec& spec) {
  v1::Job straight, resumed;
  ASSERT_NO_FATAL_FAILURE(RunStraightAndResumed(c, spec, &straight, &resumed));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(resumed.result().param_checksums(r), straight.result().param_checksums(r))
        << "rank " << r;
  }
}

// Runs `spec` to its end, flips a byte in every checkpoint file it left,
// and resumes it: the resumed job fails with DATA_LOSS, saying "corrupt"
// and naming one of the files (in `*dir`) in `*error`.
inline void ResumeFromCorruptCheckpoints(Cluster& c, const v1::JobSpec& spec,
                                         std::string* dir, std::string* error) {
  const v1::Job old = RunToEnd(c, spec);
  ASSERT_EQ(old.state(), v1::SUCCEEDED) << old.error();
  *dir = CheckpointDir(c, old.id());
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(*dir)) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
    ++files;
  }
  ASSERT_GT(files, 0) << "no checkpoint files in " << *dir;
  const v1::Job resumed = RunToEnd(c, ResumeOf(old));
  *error = resumed.error();
  ASSERT_EQ(resumed.state(), v1::FAILED);
  EXPECT_EQ(resumed.error_code(), static_cast<int>(absl::StatusCode::kDataLoss))
      << *error;
  EXPECT_NE(error->find("corrupt"), std::string::npos) << *error;
}

}  // namespace gradsync

#endif  // GRADSYNC_TESTS_INTEGRATION_CHECKPOINT_UTIL_H_
