// Parameter-server shard aggregation against a simple reference.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/optimizer.h"
#include "common/testing/fake_env.h"
#include "server/ps/ps_store.h"

namespace gradsync {
namespace {

ShardJobConfig Config(int world, bool async, int staleness = -1) {
  ShardJobConfig c;
  c.world_size = world;
  c.async = async;
  c.staleness = staleness;
  c.optimizer.kind = OptimizerKind::kSgd;
  c.optimizer.lr = 0.1f;
  c.optimizer.momentum = 0.9f;
  return c;
}

std::vector<float> Grad(int rank, int step, size_t n) {
  std::mt19937 rng(rank * 7919 + step * 31 + 1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> g(n);
  for (float& x : g) x = u(rng);
  return g;
}

struct Captured {
  bool called = false;
  absl::StatusOr<PsReply> result = absl::UnknownError("not called");
};

Reply Capture(Captured* c) {
  return [c](absl::StatusOr<PsReply> r) {
    c->called = true;
    c->result = std::move(r);
  };
}

void PushVec(PsStore* store, const std::string& job, int64_t step, int rank,
             const std::vector<float>& g, Captured* c) {
  store->Push(
      job, step, rank, g.size(),
      [&g](float* dst) {
        for (size_t i = 0; i < g.size(); ++i) dst[i] += g[i];
      },
      Capture(c));
}

class PsSyncTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(PsSyncTest, AveragesNPushesAppliesOnceAndAnswersAll) {
  const auto [world, n] = GetParam();
  PsStore store;
  std::vector<float> init(n);
  for (size_t i = 0; i < n; ++i) init[i] = 0.001f * static_cast<float>(i % 100);
  ASSERT_TRUE(store.Init("j", Config(world, false), init).ok());
  // Reference: the same optimizer on the mean gradient.
  std::vector<float> want = init;
  auto ref = Optimizer::Create(Config(world, false).optimizer, n);
  ASSERT_TRUE(ref.ok());
  for (int step = 0; step < 2; ++step) {  // twice on the same object
    std::vector<double> mean(n, 0.0);
    std::vector<Captured> caps(world);
    for (int r = world - 1; r >= 0; --r) {  // arrival order differs from rank
      std::vector<float> g = Grad(r, step, n);
      for (size_t i = 0; i < n; ++i) mean[i] += g[i];
      PushVec(&store, "j", step, r, g, &caps[r]);
      if (r > 0) {
        EXPECT_FALSE(caps[r].called) << "answered before all pushes";
      }
    }
    std::vector<float> meanf(n);
    for (size_t i = 0; i < n; ++i) meanf[i] = static_cast<float>(mean[i] / world);
    ref->Apply(want.data(), meanf.data());
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(caps[r].called);
      ASSERT_TRUE(caps[r].result.ok()) << caps[r].result.status();
      const std::vector<float>& got = *caps[r].result->params;
      ASSERT_EQ(got.size(), n);
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << i;
      EXPECT_EQ(caps[r].result->step, step + 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldsAndSizes, PsSyncTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::Values(size_t{1}, size_t{7},
                                                              size_t{1001})));

TEST(PsStore, WrongSizeWrongStepAndDuplicateAreRejectedNotSummed) {
  PsStore store;
  ASSERT_TRUE(store.Init("j", Config(2, false), std::vector<float>(10, 0)).ok());
  Captured wrong_size, wrong_step, first, dup, second;
  PushVec(&store, "j", 0, 0, std::vector<float>(9, 1), &wrong_size);
  EXPECT_EQ(wrong_size.result.status().code(), absl::StatusCode::kInvalidArgument);
  PushVec(&store, "j", 3, 0, std::vector<float>(10, 1), &wrong_step);
  EXPECT_EQ(wrong_step.result.status().code(), absl::StatusCode::kFailedPrecondition);
  PushVec(&store, "j", 0, 0, std::vector<float>(10, 1), &first);
  PushVec(&store, "j", 0, 0, std::vector<float>(10, 100), &dup);
  EXPECT_EQ(dup.result.status().code(), absl::StatusCode::kFailedPrecondition);
  PushVec(&store, "j", 0, 1, std::vector<float>(10, 3), &second);
  ASSERT_TRUE(second.result.ok());
  // mean of 1 and 3 = 2; sgd momentum first step: p = -lr*2 = -0.2
  EXPECT_NEAR((*second.result->params)[0], -0.2f, 1e-6);
  Captured unknown;
  PushVec(&store, "nope", 0, 0, std::vector<float>(10, 1), &unknown);
  EXPECT_EQ(unknown.result.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PsStore, PullWaitsForInitAndEndJobAbortsWaiters) {
  PsStore store;
  Captured early;
  store.Pull("j", true, Capture(&early));
  EXPECT_FALSE(early.called);
  ASSERT_TRUE(store.Init("j", Config(2, false), std::vector<float>(4, 5)).ok());
  ASSERT_TRUE(early.called);
  ASSERT_TRUE(early.result.ok());
  EXPECT_EQ((*early.result->params)[3], 5.0f);
  Captured waiting;
  PushVec(&store, "j", 0, 0, std::vector<float>(4, 1), &waiting);
  EXPECT_FALSE(waiting.called);
  store.EndJob("j", "rank 1 died");
  ASSERT_TRUE(waiting.called);
  EXPECT_EQ(waiting.result.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(waiting.result.status().message(), "rank 1 died");
  Captured late;
  store.Pull("j", false, Capture(&late));
  EXPECT_EQ(late.result.status().code(), absl::StatusCode::kAborted);
}

TEST(PsStore, EndedJobTombstonesAreBoundedOldestFirst) {
  PsStore store("", /*max_ended_jobs=*/2);
  store.EndJob("a", std::string(100000, 'x'));
  store.EndJob("b", "done");
  store.EndJob("b", "again");  // not a second tombstone
  EXPECT_EQ(store.NumEndedJobs(), 2u);
  store.EndJob("c", "done");
  EXPECT_EQ(store.NumEndedJobs(), 2u);
  // "a" is forgotten (a new job may use the id); "b" and "c" still refuse.
  EXPECT_TRUE(store.Init("a", Config(1, false), std::vector<float>(2, 0)).ok());
  EXPECT_EQ(store.Init("c", Config(1, false), std::vector<float>(2, 0)).code(),
            absl::StatusCode::kFailedPrecondition);
  Captured late;
  store.Pull("b", false, Capture(&late));
  ASSERT_TRUE(late.called);
  EXPECT_EQ(late.result.status().code(), absl::StatusCode::kAborted);
  EXPECT_LE(late.result.status().message().size(), PsStore::kMaxEndReasonBytes);
}

TEST(PsStore, AsyncAppliesEachPushAtOnce) {
  PsStore store;
  ShardJobConfig c = Config(2, true);
  c.optimizer.momentum = 0;
  ASSERT_TRUE(store.Init("j", c, std::vector<float>(3, 0)).ok());
  Captured a, b;
  PushVec(&store, "j", 0, 0, std::vector<float>(3, 2), &a);
  ASSERT_TRUE(a.called);                             // unbounded staleness: no waiting
  EXPECT_NEAR((*a.result->params)[0], -0.1f, 1e-6);  // -(lr/2) * 2
  PushVec(&store, "j", 1, 0, std::vector<float>(3, 2), &b);
  ASSERT_TRUE(b.called);
  EXPECT_NEAR((*b.result->params)[0], -0.2f, 1e-6);
  Captured bad;
  PushVec(&store, "j", 0, 0, std::vector<float>(3, 2), &bad);  // step repeated
  EXPECT_EQ(bad.result.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PsStore, AsyncAdamPushMovesOneNthOfASyncStep) {
  PsStore store;
  ShardJobConfig c = Config(4, true);
  c.optimizer.kind = OptimizerKind::kAdam;
  ASSERT_TRUE(store.Init("j", c, std::vector<float>(2, 0)).ok());
  Captured a;
  PushVec(&store, "j", 0, 0, std::vector<float>(2, 3), &a);
  ASSERT_TRUE(a.result.ok());
  // Adam's first step is lr * sign(g) whatever the gradient's scale; with
  // 4 workers a push must move lr/4.
  EXPECT_NEAR((*a.result->params)[0], -0.1f / 4, 1e-6);
}

TEST(PsStore, SspHoldsTheFastWorkerUntilTheSlowOneCatchesUp) {
  PsStore store;
  ASSERT_TRUE(
      store.Init("j", Config(2, true, /*staleness=*/1), std::vector<float>(3, 0)).ok());
  Captured s0, s1, slow0;
  PushVec(&store, "j", 0, 0, std::vector<float>(3, 1), &s0);
  EXPECT_TRUE(s0.called);  // rank 0 at step 1, slowest at 0: 1 ahead, allowed
  PushVec(&store, "j", 1, 0, std::vector<float>(3, 1), &s1);
  EXPECT_FALSE(s1.called);  // would be 2 ahead: held
  PushVec(&store, "j", 0, 1, std::vector<float>(3, 1), &slow0);
  EXPECT_TRUE(slow0.called);
  EXPECT_TRUE(s1.called);  // released once rank 1 advanced
  ASSERT_TRUE(s1.result.ok());
}

// Partitions of one job ("j/p<i>") are independent slices with a lock each:
// ranks push to all of them from their own threads at once, in different
// orders; every partition must end exactly where the serial reference does,
// and EndJob("j") must drop them all.
TEST(PsStore, ConcurrentPushesToManyPartitionsMatchTheReference) {
  constexpr int kWorld = 4, kParts = 6, kSteps = 5;
  constexpr size_t kN = 257;
  PsStore store;
  std::vector<std::vector<float>> want(kParts);
  for (int p = 0; p < kParts; ++p) {
    want[p].assign(kN, 0.01f * p);
    ASSERT_TRUE(store.Init(absl::StrCat("j/p", p), Config(kWorld, false), want[p]).ok());
  }
  EXPECT_EQ(store.NumJobs(), static_cast<size_t>(kParts));
  std::vector<Optimizer> ref;
  for (int p = 0; p < kParts; ++p) {
    ref.push_back(*Optimizer::Create(Config(kWorld, false).optimizer, kN));
  }
  std::atomic<int> errors{0};
  std::vector<std::vector<PsReply>> last(kWorld, std::vector<PsReply>(kParts));
  struct Answers {
    absl::Mutex mu;
    int answered = 0;  // guarded by mu
  };
  std::vector<Answers> answers(kWorld);  // outlive every reply
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      absl::Mutex& mu = answers[r].mu;
      int& answered = answers[r].answered;
      for (int step = 0; step < kSteps; ++step) {
        // Every rank pushes all partitions, each in its own order, then
        // waits for them (as a worker with all partitions in flight does).
        for (int k = 0; k < kParts; ++k) {
          const int p = (k + r) % kParts;
          const std::vector<float> g = Grad(r * 100 + p, step, kN);
          store.Push(
              absl::StrCat("j/p", p), step, r, kN,
              [&g](float* dst) {
                for (size_t i = 0; i < g.size(); ++i) dst[i] += g[i];
              },
              [&, p](absl::StatusOr<PsReply> res) {
                if (!res.ok()) {
                  ++errors;
                } else {
                  last[r][p] = *res;
                }
                absl::MutexLock l(&mu);
                ++answered;
              });
        }
        absl::MutexLock l(&mu);
        const int want = (step + 1) * kParts;
        auto all = [&answered, want]() { return answered == want; };
        ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(10)));
      }
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(errors.load(), 0);
  for (int p = 0; p < kParts; ++p) {
    for (int step = 0; step < kSteps; ++step) {
      std::vector<double> sum(kN, 0.0);
      for (int r = 0; r < kWorld; ++r) {
        const std::vector<float> g = Grad(r * 100 + p, step, kN);
        for (size_t i = 0; i < kN; ++i) sum[i] += g[i];
      }
      std::vector<float> mean(kN);
      for (size_t i = 0; i < kN; ++i) mean[i] = static_cast<float>(sum[i] / kWorld);
      ref[p].Apply(want[p].data(), mean.data());
    }
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_NE(last[r][p].params, nullptr);
      EXPECT_EQ(last[r][p].step, kSteps);
      for (size_t i = 0; i < kN; ++i) {
        ASSERT_NEAR((*last[r][p].params)[i], want[p][i], 1e-5) << p << " " << i;
      }
    }
  }
  store.EndJob("j", "done");
  EXPECT_EQ(store.NumJobs(), 0u);
  Captured late;
  PushVec(&store, "j/p0", kSteps, 0, std::vector<float>(kN, 1), &late);
  EXPECT_EQ(late.result.status().code(), absl::StatusCode::kAborted);
}

TEST(PsStore, SnapshotsAlreadyHandedOutAreNeverOverwritten) {
  PsStore store;
  ASSERT_TRUE(store.Init("j", Config(1, false), std::vector<float>(5, 1)).ok());
  Captured a, b;
  PushVec(&store, "j", 0, 0, std::vector<float>(5, 1), &a);
  ASSERT_TRUE(a.result.ok());
  const std::vector<float> first = *a.result->params;  // a still holds it
  PushVec(&store, "j", 1, 0, std::vector<float>(5, 1), &b);
  ASSERT_TRUE(b.result.ok());
  EXPECT_EQ(*a.result->params, first);
  EXPECT_NE(*b.result->params, first);
}

TEST(PsStore, ShutdownFailsPendingAndLaterCallsWithUnavailable) {
  PsStore store;
  ASSERT_TRUE(store.Init("j/p0", Config(2, false), std::vector<float>(3, 0)).ok());
  Captured pending, pull, later;
  PushVec(&store, "j/p0", 0, 0, std::vector<float>(3, 1), &pending);
  store.Pull("j/p1", true, Capture(&pull));  // waits for an Init
  EXPECT_FALSE(pending.called);
  EXPECT_FALSE(pull.called);
  store.Shutdown();
  EXPECT_EQ(pending.result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(pull.result.status().code(), absl::StatusCode::kUnavailable);
  PushVec(&store, "j/p0", 0, 1, std::vector<float>(3, 1), &later);
  EXPECT_EQ(later.result.status().code(), absl::StatusCode::kUnavailable);
}

// TryPush as the PS services call it, then the answers it completed: true
// when it pushed, `*reply` untouched (and nothing to answer) when it did not.
bool TryPushVec(PsStore* store, const std::string& job, int64_t step, int rank,
                const std::vector<float>& g, Reply* reply) {
  PsCompletions done;
  const bool took = store->TryPush(
      job, step, rank, g.size(),
      [&g](float* dst) {
        for (size_t i = 0; i < g.size(); ++i) dst[i] += g[i];
      },
      reply, &done);
  if (!took) {
    EXPECT_TRUE(done.empty());
  }
  RunCompletions(&done);
  return took;
}

// TryPush on a free slice is Push: the same sums, steps and answers, bit
// for bit, sync (N pushes a step) and async, at worlds 1-4 and odd sizes.
TEST(PsStore, TryPushOnAFreeSliceIsPushBitForBit) {
  for (bool async : {false, true}) {
    for (int world : {1, 2, 3, 4}) {
      for (size_t n : {size_t{1}, size_t{7}, size_t{1001}}) {
        SCOPED_TRACE(absl::StrCat(async ? "async" : "sync", " world ", world, " n ", n));
        PsStore a, b;
        std::vector<float> init(n);
        for (size_t i = 0; i < n; ++i) init[i] = 0.01f * static_cast<float>(i % 37);
        ASSERT_TRUE(a.Init("j", Config(world, async), init).ok());
        ASSERT_TRUE(b.Init("j", Config(world, async), init).ok());
        for (int step = 0; step < 3; ++step) {
          std::vector<Captured> ca(world), cb(world);
          for (int r = world - 1; r >= 0; --r) {
            const std::vector<float> g = Grad(r, step, n);
            PushVec(&a, "j", step, r, g, &ca[r]);
            Reply reply = Capture(&cb[r]);
            ASSERT_TRUE(TryPushVec(&b, "j", step, r, g, &reply));
            EXPECT_EQ(ca[r].called, cb[r].called) << "rank " << r;
          }
          for (int r = 0; r < world; ++r) {
            ASSERT_TRUE(ca[r].called && cb[r].called) << "rank " << r;
            ASSERT_TRUE(ca[r].result.ok()) << ca[r].result.status();
            ASSERT_TRUE(cb[r].result.ok()) << cb[r].result.status();
            EXPECT_EQ(ca[r].result->step, cb[r].result->step);
            EXPECT_EQ(*ca[r].result->params, *cb[r].result->params)
                << "step " << step << " rank " << r;
          }
        }
      }
    }
  }
}

TEST(PsStore, TryPushAnswersAnUnknownOrEndedSliceAtOnce) {
  PsStore store;
  Captured unknown, ended;
  Reply reply = Capture(&unknown);
  EXPECT_TRUE(TryPushVec(&store, "nope", 0, 0, {1.0f}, &reply));
  EXPECT_EQ(unknown.result.status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store.Init("j/p0", Config(1, false), {0.0f}).ok());
  store.EndJob("j", "over");
  reply = Capture(&ended);
  EXPECT_TRUE(TryPushVec(&store, "j/p0", 0, 0, {1.0f}, &reply));
  EXPECT_EQ(ended.result.status().code(), absl::StatusCode::kAborted);
}

// A slice that writes checkpoints (an fsync) is never pushed on the
// caller's thread: TryPush declines, and the reply it leaves still works.
TEST(PsStore, TryPushLeavesACheckpointingSliceToPush) {
  char tmpl[] = "/tmp/gradsync-trypush-XXXXXX";
  const std::string root = mkdtemp(tmpl);
  {
    PsStore store(root);
    ShardJobConfig c = Config(1, false);
    c.checkpoint_every = 1;
    ASSERT_TRUE(store.Init("j/p0", c, {0.0f, 0.0f}).ok());
    Captured cap;
    Reply reply = Capture(&cap);
    EXPECT_FALSE(TryPushVec(&store, "j/p0", 0, 0, {1.0f, 1.0f}, &reply));
    EXPECT_FALSE(cap.called);
    store.Push(
        "j/p0", 0, 0, 2,
        [](float* dst) {
          dst[0] += 1;
          dst[1] += 1;
        },
        std::move(reply));
    ASSERT_TRUE(cap.called);
    ASSERT_TRUE(cap.result.ok()) << cap.result.status();
    EXPECT_EQ(cap.result->step, 1);
    EXPECT_EQ(store.Checkpoints("j").steps.size(), 1u);
  }
  std::filesystem::remove_all(root);
}

// While another thread holds the slice (its push is being summed), TryPush
// declines at once instead of waiting; the same reply then goes through
// Push once the slice is free.
TEST(PsStore, TryPushDeclinesABusySliceWithoutWaiting) {
  PsStore store;
  ASSERT_TRUE(store.Init("j", Config(2, false), std::vector<float>(4, 0)).ok());
  absl::Mutex mu;
  bool inside = false, release = false;
  Captured first;
  std::thread holder([&] {
    store.Push(
        "j", 0, 0, 4,
        [&](float* dst) {
          absl::MutexLock lock(&mu);
          inside = true;
          mu.Await(absl::Condition(&release));
          for (int i = 0; i < 4; ++i) dst[i] += 1;
        },
        Capture(&first));
  });
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&inside));
  }
  Captured second;
  Reply reply = Capture(&second);
  const absl::Time start = absl::Now();
  EXPECT_FALSE(TryPushVec(&store, "j", 0, 1, std::vector<float>(4, 3), &reply));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "TryPush waited";
  EXPECT_FALSE(second.called);
  {
    absl::MutexLock lock(&mu);
    release = true;
  }
  holder.join();
  EXPECT_FALSE(first.called);  // one of two pushes so far
  store.Push(
      "j", 0, 1, 4,
      [](float* dst) {
        for (int i = 0; i < 4; ++i) dst[i] += 3;
      },
      std::move(reply));
  ASSERT_TRUE(first.called && second.called);
  ASSERT_TRUE(second.result.ok()) << second.result.status();
  // mean of 1 and 3 = 2; SGD's first step with momentum: -lr * 2 = -0.2.
  for (float x : *second.result->params) EXPECT_NEAR(x, -0.2f, 1e-6);
}

}  // namespace
}  // namespace gradsync

namespace gradsync {
namespace {

// Pulls for slices not installed (yet) are bounded in number, end at their
// deadline and on cancellation, and hold nothing afterwards.
TEST(PsStore, PendingPullsAreBoundedAndEndAtTheirDeadlineOrCancel) {
  PsStore store;
  std::vector<Captured> waiting(kMaxPendingPulls);
  std::vector<uint64_t> tickets;
  for (size_t i = 0; i < kMaxPendingPulls; ++i) {
    tickets.push_back(
        store.Pull(absl::StrCat("ghost-", i % 5), true, Capture(&waiting[i])));
    EXPECT_NE(tickets.back(), 0u);
  }
  EXPECT_EQ(store.NumPendingPulls(), kMaxPendingPulls);
  Captured over;
  EXPECT_EQ(store.Pull("ghost-x", true, Capture(&over)), 0u);
  ASSERT_TRUE(over.called);
  EXPECT_EQ(over.result.status().code(), absl::StatusCode::kResourceExhausted);
  // Cancellation (the RPC's) ends one wait, once.
  store.CancelPull(tickets[0], absl::CancelledError("pull cancelled"));
  ASSERT_TRUE(waiting[0].called);
  EXPECT_EQ(waiting[0].result.status().code(), absl::StatusCode::kCancelled);
  store.CancelPull(tickets[0], absl::CancelledError("again"));  // no-op
  EXPECT_EQ(store.NumPendingPulls(), kMaxPendingPulls - 1);
  store.EndJob("ghost-1", "gone");
  EXPECT_EQ(waiting[1].result.status().code(), absl::StatusCode::kAborted);
  store.Shutdown();
  EXPECT_EQ(store.NumPendingPulls(), 0u);
  for (const Captured& c : waiting) EXPECT_TRUE(c.called);
}

TEST(PsStore, APullPastItsDeadlineIsAnsweredDeadlineExceeded) {
  FakeEnv env;
  PsStore store("", PsStore::kDefaultMaxEndedJobs, &env);
  Captured early;
  store.Pull("late", true, Capture(&early), env.Now() + absl::Milliseconds(20));
  env.Advance(absl::Milliseconds(19));
  Captured before;  // not yet overdue
  store.Pull("other", true, Capture(&before), env.Now() + absl::Seconds(30));
  EXPECT_FALSE(early.called);
  env.Advance(absl::Milliseconds(1));
  Captured next;  // any later pull reaps the overdue one
  store.Pull("other", true, Capture(&next), env.Now() + absl::Seconds(30));
  ASSERT_TRUE(early.called);
  EXPECT_EQ(early.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(before.called || next.called);
  EXPECT_EQ(store.NumPendingPulls(), 2u);
  store.Shutdown();
}

TEST(PsStore, FinalPullAnswersEveryRankOnceAllHaveAsked) {
  PsStore store;
  ASSERT_TRUE(store.Init("j", Config(3, /*async=*/true), std::vector<float>(4, 1)).ok());
  std::vector<Captured> fin(3);
  store.FinalPull("j", 0, Capture(&fin[0]));
  store.FinalPull("j", 0, Capture(&fin[1]));  // the same rank twice counts once
  EXPECT_FALSE(fin[0].called || fin[1].called);
  Captured push;
  PushVec(&store, "j", 0, 2, std::vector<float>(4, 1), &push);  // rank 2's last
  ASSERT_TRUE(push.result.ok());
  store.FinalPull("j", 1, Capture(&fin[2]));
  EXPECT_FALSE(fin[2].called);
  Captured last;
  store.FinalPull("j", 2, Capture(&last));
  for (const Captured* c : {&fin[0], &fin[1], &fin[2], &last}) {
    ASSERT_TRUE(c->called);
    ASSERT_TRUE(c->result.ok()) << c->result.status();
    EXPECT_EQ(*c->result->params, *last.result->params);  // all equal
  }
  EXPECT_NE((*last.result->params)[0], 1.0f);  // rank 2's push is in
  Captured unknown;
  store.FinalPull("nope", 0, Capture(&unknown));
  EXPECT_EQ(unknown.result.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gradsync
