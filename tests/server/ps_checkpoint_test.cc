// PS slices' checkpoints: written every k sync steps (the last two kept),
// listed, and resumed from into a fresh store (a restarted shard) with the
// same parameters and optimizer state as a slice that never stopped.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/checkpoint.h"
#include "server/ps/ps_store.h"

namespace gradsync {
namespace {

ShardJobConfig AdamConfig(int world, int64_t every) {
  ShardJobConfig c;
  c.world_size = world;
  c.optimizer.kind = OptimizerKind::kAdam;
  c.optimizer.lr = 0.01f;
  c.checkpoint_every = every;
  return c;
}

std::vector<float> Grad(int rank, int64_t step, size_t n) {
  std::mt19937 rng(static_cast<uint32_t>(rank * 7919 + step * 31 + 1));
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> g(n);
  for (float& x : g) x = u(rng);
  return g;
}

// Every rank pushes `step` to `key`; the parameters after it (or the error).
absl::StatusOr<PsReply> Step(PsStore* store, const std::string& key, int world,
                             int64_t step, size_t n) {
  absl::StatusOr<PsReply> last = absl::UnknownError("no reply");
  for (int r = 0; r < world; ++r) {
    const std::vector<float> g = Grad(r, step, n);
    store->Push(
        key, step, r, n,
        [&g](float* dst) {
          for (size_t i = 0; i < g.size(); ++i) dst[i] += g[i];
        },
        [&last](absl::StatusOr<PsReply> rep) { last = std::move(rep); });
  }
  return last;
}

class PsCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gradsync-ps-ckpt-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
  const size_t n_ = 1000;
  const std::vector<float> init_ = std::vector<float>(1000, 0.5f);
};

TEST_F(PsCheckpointTest, WritesEveryKStepsKeepsTheLastTwo) {
  PsStore store(root_);
  ASSERT_TRUE(store.Init("j-1/p0", AdamConfig(2, 2), init_).ok());
  for (int64_t t = 0; t < 7; ++t) ASSERT_TRUE(Step(&store, "j-1/p0", 2, t, n_).ok());
  const CheckpointListing l = store.Checkpoints("j-1");
  EXPECT_EQ(l.slices, 1);
  EXPECT_EQ(l.steps, std::vector<int64_t>({4, 6}));
  absl::StatusOr<Checkpoint> c = ReadCheckpoint(CheckpointFile(root_ + "/j-1", "p0", 6));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->key, "j-1/p0");
  EXPECT_EQ(c->step, 6);
  EXPECT_EQ(c->optimizer_steps, 6);
  EXPECT_EQ(c->params.size(), n_);
  EXPECT_EQ(c->first_moment.size(), n_);
  EXPECT_EQ(c->second_moment.size(), n_);
  EXPECT_EQ(store.Checkpoints("j-9").slices, 0);
}

TEST_F(PsCheckpointTest, ResumedSliceMatchesOneThatNeverStopped) {
  std::vector<float> want;
  {
    PsStore straight(root_ + "/straight");
    ASSERT_TRUE(straight.Init("j-1/p0", AdamConfig(2, 0), init_).ok());
    for (int64_t t = 0; t < 10; ++t) {
      absl::StatusOr<PsReply> r = Step(&straight, "j-1/p0", 2, t, n_);
      ASSERT_TRUE(r.ok()) << r.status();
      if (t == 9) want = *r->params;
    }
  }
  {
    PsStore first(root_);  // killed after step 7 (checkpoint at 6)
    ASSERT_TRUE(first.Init("j-1/p0", AdamConfig(2, 3), init_).ok());
    for (int64_t t = 0; t < 7; ++t) ASSERT_TRUE(Step(&first, "j-1/p0", 2, t, n_).ok());
  }
  PsStore restarted(root_);
  ShardJobConfig c = AdamConfig(2, 3);
  c.resume_from = "j-1";
  c.resume_step = 6;
  // The INIT values are ignored when resuming.
  ASSERT_TRUE(restarted.Init("j-2/p0", c, std::vector<float>(n_, 0.0f)).ok());
  absl::StatusOr<PsReply> pulled = absl::UnknownError("no reply");
  restarted.Pull("j-2/p0", true, [&](absl::StatusOr<PsReply> r) { pulled = r; });
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->step, 6);
  absl::StatusOr<PsReply> r = absl::UnknownError("no step");
  for (int64_t t = 6; t < 10; ++t) {
    r = Step(&restarted, "j-2/p0", 2, t, n_);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ(*r->params, want);  // bit-identical
  EXPECT_EQ(r->step, 10);
  // The resumed job checkpoints under its own id.
  EXPECT_EQ(restarted.Checkpoints("j-2").steps, std::vector<int64_t>({9}));
}

TEST_F(PsCheckpointTest, ResumeRefusesMissingCorruptOrMismatchedFiles) {
  {
    PsStore first(root_);
    ASSERT_TRUE(first.Init("j-1/p0", AdamConfig(1, 1), init_).ok());
    ASSERT_TRUE(Step(&first, "j-1/p0", 1, 0, n_).ok());
  }
  PsStore store(root_);
  ShardJobConfig c = AdamConfig(1, 1);
  c.resume_from = "j-1";
  c.resume_step = 5;
  EXPECT_TRUE(absl::IsNotFound(store.Init("j-2/p0", c, init_)));
  c.resume_step = 1;
  absl::Status st = store.Init("j-3/p0", c, std::vector<float>(n_ + 1));
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  const std::string path = CheckpointFile(root_ + "/j-1", "p0", 1);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  st = store.Init("j-4/p0", c, init_);
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_NE(st.message().find(path), std::string::npos) << st;
  EXPECT_EQ(store.NumJobs(), 0u);
}

// Async: a push of `rank` at its next step; the reply (or error).
absl::StatusOr<PsReply> AsyncPush(PsStore* store, const std::string& key, int rank,
                                  int64_t step, size_t n) {
  absl::StatusOr<PsReply> got = absl::UnknownError("no reply");
  const std::vector<float> g = Grad(rank, step, n);
  store->Push(
      key, step, rank, n,
      [&g](float* dst) {
        for (size_t i = 0; i < g.size(); ++i) dst[i] += g[i];
      },
      [&got](absl::StatusOr<PsReply> r) { got = std::move(r); });
  return got;
}

TEST_F(PsCheckpointTest, AsyncSliceCheckpointsWhenTheSlowestRankReachesK) {
  ShardJobConfig c = AdamConfig(2, 2);
  c.async = true;
  {
    PsStore store(root_);
    ASSERT_TRUE(store.Init("j-1/p0", c, init_).ok());
    for (int64_t t = 0; t < 5; ++t) {  // rank 0 runs ahead
      ASSERT_TRUE(AsyncPush(&store, "j-1/p0", 0, t, n_).ok());
    }
    for (int64_t t = 0; t < 3; ++t) {
      ASSERT_TRUE(AsyncPush(&store, "j-1/p0", 1, t, n_).ok());
    }
    // The slowest rank passed 2 once (not 1 or 3): one checkpoint, at 2,
    // holding the 5 + 2 pushes applied by then.
    EXPECT_EQ(store.Checkpoints("j-1").steps, std::vector<int64_t>({2}));
    absl::StatusOr<Checkpoint> ck =
        ReadCheckpoint(CheckpointFile(root_ + "/j-1", "p0", 2));
    ASSERT_TRUE(ck.ok()) << ck.status();
    EXPECT_EQ(ck->optimizer_steps, 7);
  }
  PsStore restarted(root_);
  c.resume_from = "j-1";
  c.resume_step = 2;
  ASSERT_TRUE(restarted.Init("j-2/p0", c, init_).ok());
  absl::StatusOr<PsReply> pulled = absl::UnknownError("no reply");
  restarted.Pull("j-2/p0", true, [&](absl::StatusOr<PsReply> r) { pulled = r; });
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->step, 2);
  // Every rank continues at step 2.
  EXPECT_TRUE(
      absl::IsFailedPrecondition(AsyncPush(&restarted, "j-2/p0", 0, 0, n_).status()));
  EXPECT_TRUE(AsyncPush(&restarted, "j-2/p0", 0, 2, n_).ok());
  EXPECT_TRUE(AsyncPush(&restarted, "j-2/p0", 1, 2, n_).ok());
}

TEST_F(PsCheckpointTest, NoRootRefusesCheckpointingJobs) {
  PsStore store;
  absl::Status st = store.Init("j-1/p0", AdamConfig(1, 1), init_);
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
}

}  // namespace
}  // namespace gradsync
