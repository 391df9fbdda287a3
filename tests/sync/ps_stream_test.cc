// PS push/pull over the push streams (worker/sync/ps_stream.h,
// server/ps/ps_stream.h) against the unary calls they replace: both paths
// give every rank the same step, end at the deadline, on Abort and on
// EndJob, fail fast when the shard is gone, and the stream admits only what
// its credentials prove. A real PsService on loopback, in one process.
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/job_secret.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "tests/sync/ps_test_util.h"
#include "worker/sync/ps_client.h"

namespace gradsync {
namespace {

// Sets PsPushStreams() for one test, back to the default after it; the
// shards sum small pushes on the reaction that read them (Inline) or always
// on their reduce threads (Pool).
class PsPushPaths : public ::testing::TestWithParam<std::tuple<bool, bool>> {
 protected:
  void SetUp() override { SetPsPushStreams(std::get<0>(GetParam())); }
  void TearDown() override { SetPsPushStreams(true); }
  static std::unique_ptr<PsServer> Start() {
    return StartPs(std::get<1>(GetParam()) ? kPsInlineBytes : 0);
  }
};

INSTANTIATE_TEST_SUITE_P(, PsPushPaths,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<bool, bool>>& p) {
                           return std::string(std::get<0>(p.param) ? "Streams"
                                                                   : "Unary") +
                                  (std::get<1>(p.param) ? "Inline" : "Pool");
                         });

// `count` partitions of odd sizes for job `job`, alternating over `shards`.
std::vector<PsPartitionRef> OddPartitions(const std::string& job, int count,
                                          const std::vector<PsServer*>& shards,
                                          size_t* total) {
  std::vector<PsPartitionRef> partitions;
  uint64_t offset = 0;
  for (int p = 0; p < count; ++p) {
    PsPartitionRef partition;
    partition.key = absl::StrCat(job, "/p", p);
    partition.address = shards[p % shards.size()]->address;
    partition.offset = offset;
    partition.count = 1 + (p * 5) % 11;
    offset += partition.count;
    partitions.push_back(partition);
  }
  *total = offset;
  return partitions;
}

v1::ShardConfig SgdConfig(int world) {
  v1::ShardConfig config;
  config.set_world_size(world);
  config.set_mode(v1::SYNC_MODE_SYNC);
  config.set_optimizer(v1::OPTIMIZER_SGD);
  config.set_lr(0.1f);
  return config;
}

std::vector<int> AllOf(const std::vector<PsPartitionRef>& partitions) {
  std::vector<int> all(partitions.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return all;
}

// Rank 0 of job `job` (`world` ranks, SGD sync) with `count` odd partitions on
// one shard, installed (Init) from 0.5; gradients of 1.
struct OneShardJob {
  OneShardJob(PsServer* ps, const std::string& job, int count, int world)
      : partitions(OddPartitions(job, count, {ps}, &total)),
        creds{TestKey()->SecretOf(job, world), world},
        client(0, creds, partitions),
        grad(total, 1.0f),
        params(total) {
    const std::vector<float> init(total, 0.5f);
    EXPECT_TRUE(
        client.Init(init.data(), SgdConfig(world), absl::Now() + absl::Seconds(10)).ok());
  }
  absl::Status Push(int64_t step, absl::Duration timeout) {
    return client.PushPull(step, grad.data(), params.data(), AllOf(partitions),
                           absl::Now() + timeout);
  }

  size_t total = 0;
  const std::vector<PsPartitionRef> partitions;
  const PsCredentials creds;
  PsClient client;
  std::vector<float> grad, params;
};

// Three ranks, two shards, odd partitions, three steps: every rank gets every
// partition's averaged SGD step each time. With streams, each rank opens one
// stream per shard for all the steps.
TEST_P(PsPushPaths, EveryRankGetsTheSameStepEveryStep) {
  constexpr int kWorld = 3;
  auto a = Start();
  auto b = Start();
  size_t total = 0;
  const std::vector<PsPartitionRef> partitions =
      OddPartitions("paths-job", 11, {a.get(), b.get()}, &total);
  const PsCredentials creds{TestKey()->SecretOf("paths-job", kWorld), kWorld};
  const std::vector<float> init(total, 1.0f);
  {
    PsClient rank0(0, creds, partitions);
    ASSERT_TRUE(
        rank0.Init(init.data(), SgdConfig(kWorld), absl::Now() + absl::Seconds(10)).ok());
  }
  std::vector<std::vector<float>> params(kWorld, std::vector<float>(total));
  std::vector<absl::Status> status(kWorld);
  std::vector<int64_t> opened(kWorld, -1);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      PsClient client(r, creds, partitions);
      // Gradients 1, 2, 3: the mean is 2, each step moves 0.2.
      const std::vector<float> grad(total, static_cast<float>(r + 1));
      const absl::Time deadline = absl::Now() + absl::Seconds(20);
      for (int64_t step = 0; step < 3 && status[r].ok(); ++step) {
        status[r] = client.PushPull(step, grad.data(), params[r].data(),
                                    AllOf(partitions), deadline);
      }
      opened[r] = client.streams_opened();
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    EXPECT_EQ(opened[r], std::get<0>(GetParam()) ? 2 : 0) << "rank " << r;
    for (size_t i = 0; i < total; ++i) {
      ASSERT_NEAR(params[r][i], 1.0f - 3 * 0.2f, 1e-6) << "rank " << r << " float " << i;
    }
  }
  // Where the shards summed the 3 x 11 x 3 pushes: with Inline most on the
  // reaction that read them (a slice another rank's push holds goes to the
  // reduce threads), with Pool all on the reduce threads.
  double on_reaction = 0, on_pool = 0;
  for (auto* ps : {a.get(), b.get()}) {
    on_reaction += ps->traffic.push_pull.summed_inline->value();
    on_pool += ps->traffic.push_pull.summed_on_pool->value();
  }
  EXPECT_EQ(on_reaction + on_pool, kWorld * 11 * 3);
  if (std::get<1>(GetParam())) {
    EXPECT_GT(on_reaction, 0);
  } else {
    EXPECT_EQ(on_reaction, 0);
  }
  for (auto* ps : {a.get(), b.get()}) ps->store.EndJob("paths-job", "test over");
}

// Async with staleness 0 (SSP): rank 0's push of step 0 is held until
// rank 1 has pushed step 0 too; rank 1's push releases it, on whichever
// thread sums rank 1's push (the reaction that read it, with Inline), and
// both get the parameters after both pushes.
TEST_P(PsPushPaths, AHeldAsyncPushIsReleasedByTheSlowRanksPush) {
  auto ps = Start();
  size_t total = 0;
  const std::vector<PsPartitionRef> partitions =
      OddPartitions("ssp-job", 3, {ps.get()}, &total);
  const PsCredentials creds{TestKey()->SecretOf("ssp-job", 2), 2};
  v1::ShardConfig config = SgdConfig(2);
  config.set_mode(v1::SYNC_MODE_ASYNC);
  config.set_staleness(0);
  const std::vector<float> init(total, 0.5f);
  {
    PsClient rank0(0, creds, partitions);
    ASSERT_TRUE(rank0.Init(init.data(), config, absl::Now() + absl::Seconds(10)).ok());
  }
  std::vector<std::vector<float>> params(2, std::vector<float>(total));
  absl::Status fast_status;
  absl::Notification fast_done;
  std::thread fast([&] {
    PsClient client(0, creds, partitions);
    const std::vector<float> grad(total, 1.0f);
    fast_status = client.PushPull(0, grad.data(), params[0].data(), AllOf(partitions),
                                  absl::Now() + absl::Seconds(20));
    fast_done.Notify();
  });
  // Held: rank 1 has not pushed step 0.
  EXPECT_FALSE(fast_done.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  PsClient slow(1, creds, partitions);
  const std::vector<float> grad(total, 3.0f);
  const absl::Status slow_status =
      slow.PushPull(0, grad.data(), params[1].data(), AllOf(partitions),
                    absl::Now() + absl::Seconds(20));
  EXPECT_TRUE(fast_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  fast.join();
  ASSERT_TRUE(fast_status.ok()) << fast_status;
  ASSERT_TRUE(slow_status.ok()) << slow_status;
  // Each async push applies lr/N x its gradient at once: 0.5 - 0.05 x (1 + 3).
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < total; ++i) {
      ASSERT_NEAR(params[r][i], 0.5f - 0.05f * 4, 1e-6) << "rank " << r << " " << i;
    }
  }
  ps->store.EndJob("ssp-job", "test over");
}

// One rank of two pushes and the other never does: the push ends at its
// deadline, and a retry of the same step is refused (the shard holds the
// first push), not summed twice.
TEST_P(PsPushPaths, APushNobodyCompletesEndsAtItsDeadline) {
  auto ps = Start();
  OneShardJob job(ps.get(), "late-job", 3, 2);
  const absl::Time t0 = absl::Now();
  absl::Status st = job.Push(0, absl::Milliseconds(300));
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_NE(st.message().find("PS shard " + ps->address), std::string::npos) << st;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3));
  st = job.client.PushPull(0, job.grad.data(), job.params.data(), {0},
                           absl::Now() + absl::Seconds(5));
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find("late-job/p0"), std::string::npos) << st;
  ps->store.EndJob("late-job", "test over");
}

// A push that waits for a rank that never comes ends at once when the
// worker aborts (the job failed elsewhere), with the abort's reason, and
// when the shard ends the job (ABORTED).
TEST_P(PsPushPaths, AbortAndEndJobEndAWaitingPushAtOnce) {
  auto ps = Start();
  size_t total = 0;
  const std::vector<PsPartitionRef> partitions =
      OddPartitions("abort-job", 4, {ps.get()}, &total);
  const PsCredentials creds{TestKey()->SecretOf("abort-job", 2), 2};
  const std::vector<float> init(total, 0.5f), grad(total, 1.0f);
  std::vector<float> params(total);
  PsClient client(0, creds, partitions);
  ASSERT_TRUE(
      client.Init(init.data(), SgdConfig(2), absl::Now() + absl::Seconds(10)).ok());
  absl::Time t0 = absl::Now();
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(200));
    client.Abort(absl::CancelledError("job cancelled by the test"));
  });
  absl::Status st = client.PushPull(0, grad.data(), params.data(), AllOf(partitions),
                                    t0 + absl::Seconds(30));
  aborter.join();
  EXPECT_FALSE(st.ok());
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5)) << st;
  // Later calls fail with the abort's reason, without reaching the shard.
  st =
      client.PushPull(1, grad.data(), params.data(), {0}, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(st, absl::CancelledError("job cancelled by the test"));

  // Rank 1's client (rank 0's first push of step 0 is held): the shard
  // ends the job while rank 1's step 1 waits for rank 0.
  PsClient rank1(1, creds, partitions);
  ASSERT_TRUE(rank1
                  .PushPull(0, grad.data(), params.data(), AllOf(partitions),
                            absl::Now() + absl::Seconds(10))
                  .ok());
  t0 = absl::Now();
  std::thread ender([&] {
    absl::SleepFor(absl::Milliseconds(200));
    ps->store.EndJob("abort-job", "ended by the test");
  });
  st = rank1.PushPull(1, grad.data(), params.data(), AllOf(partitions),
                      t0 + absl::Seconds(30));
  ender.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted) << st;
  EXPECT_NE(st.message().find("ended by the test"), std::string::npos) << st;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5)) << st;
}

// A shard that is gone fails the next push quickly (UNAVAILABLE), whether
// the stream to it was open or is opened anew: never a wait to the
// deadline.
TEST_P(PsPushPaths, AShardThatIsGoneFailsThePushQuickly) {
  auto ps = Start();
  OneShardJob job(ps.get(), "gone-job", 2, 1);
  ASSERT_TRUE(job.Push(0, absl::Seconds(10)).ok());
  ps->server->Shutdown(std::chrono::system_clock::now());
  ps->server->Wait();
  for (int64_t step = 1; step <= 2; ++step) {
    const absl::Time t0 = absl::Now();
    absl::Status st = job.Push(step, absl::Seconds(30));
    EXPECT_FALSE(st.ok()) << "step " << step;
    EXPECT_LT(absl::Now() - t0, absl::Seconds(10)) << "step " << step << ": " << st;
  }
}

// A partition that fails on one shard cancels the streams to the others, whose
// partitions were answered already; the client is then destroyed at once, as a
// failed worker does (closing streams whose end is still on its way). Many
// rounds, to give that race its chances; each ends promptly.
TEST(PsPushStreams, AFailedPartitionThenAnImmediateTeardownNeverHangs) {
  SetPsPushStreams(true);
  auto a = StartPs();
  auto b = StartPs();
  for (int round = 0; round < 20; ++round) {
    const std::string job = absl::StrCat("teardown-", round);
    size_t total = 0;
    const std::vector<PsPartitionRef> partitions =
        OddPartitions(job, 2, {a.get(), b.get()}, &total);
    const PsCredentials creds{TestKey()->SecretOf(job, 1), 1};
    const std::vector<float> init(total, 0.5f), grad(total, 1.0f);
    std::vector<float> params(total);
    {
      // Only partition 0 (on shard a) is installed; partition 1 fails on b.
      PsClient installer(0, creds, {partitions[0]});
      ASSERT_TRUE(
          installer.Init(init.data(), SgdConfig(1), absl::Now() + absl::Seconds(10))
              .ok());
    }
    const absl::Time t0 = absl::Now();
    {
      PsClient client(0, creds, partitions);
      absl::Status st = client.PushPull(0, grad.data(), params.data(), AllOf(partitions),
                                        t0 + absl::Seconds(30));
      EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
      EXPECT_NE(st.message().find(job + "/p1"), std::string::npos) << st;
    }
    EXPECT_LT(absl::Now() - t0, absl::Seconds(5)) << "round " << round;
    a->store.EndJob(job, "test over");
  }
}

// A partition listed twice in one push fails at once (a stream could not tell
// its two answers apart), instead of leaving one copy waiting.
TEST(PsPushStreams, APartitionListedTwiceFailsAtOnce) {
  SetPsPushStreams(true);
  auto ps = StartPs();
  OneShardJob job(ps.get(), "twice-job", 2, 1);
  const absl::Time t0 = absl::Now();
  absl::Status st = job.client.PushPull(0, job.grad.data(), job.params.data(), {0, 1, 0},
                                        t0 + absl::Seconds(30));
  EXPECT_FALSE(st.ok());
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10)) << st;
  ps->store.EndJob("twice-job", "test over");
}

// Raw PushPullStream calls: what a stream's credentials prove is checked for
// every job and rank its frames name, not only for the first frame.
class PushPullStreamAccess : public ::testing::Test {
 protected:
  void SetUp() override {
    ps_ = StartPs();
    PsPartitionRef partition;
    partition.key = "member-job/p0";
    partition.address = ps_->address;
    partition.count = 4;
    PsClient rank0(0, PsCredentials{TestKey()->SecretOf("member-job", 1), 1},
                   {partition});
    const std::vector<float> init(4, 1.0f);
    ASSERT_TRUE(
        rank0.Init(init.data(), SgdConfig(1), absl::Now() + absl::Seconds(10)).ok());
  }
  void TearDown() override { ps_->store.EndJob("member-job", "test over"); }

  // Opens a stream as a member of member-job (world 1), writes `frames`,
  // reads every answer, and returns how the stream ended.
  grpc::Status Run(const std::vector<v1::TensorFrame>& frames,
                   std::vector<v1::TensorFrame>* answers) {
    auto stub = v1::ParameterServer::NewStub(MakeChannel(ps_->address));
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
    AddPsCredentials(PsCredentials{TestKey()->SecretOf("member-job", 1), 1}, &ctx);
    auto stream = stub->PushPullStream(&ctx);
    for (const v1::TensorFrame& f : frames) {
      if (!stream->Write(f)) break;
      v1::TensorFrame answer;
      if (!stream->Read(&answer)) break;
      answers->push_back(answer);
    }
    stream->WritesDone();
    v1::TensorFrame extra;
    while (stream->Read(&extra)) answers->push_back(extra);
    return stream->Finish();
  }

  static v1::TensorFrame Grad(const std::string& key, int rank, int64_t step) {
    v1::TensorFrame f;
    f.mutable_header()->set_kind(v1::TensorHeader::GRAD);
    f.mutable_header()->set_job_id(key);
    f.mutable_header()->set_rank(rank);
    f.mutable_header()->set_step(step);
    f.mutable_header()->set_count(4);
    f.set_data(std::string(16, '\0'));
    return f;
  }

  std::unique_ptr<PsServer> ps_;
};

TEST_F(PushPullStreamAccess, AMemberPushesAndGetsItsSliceBack) {
  std::vector<v1::TensorFrame> answers;
  grpc::Status st =
      Run({Grad("member-job/p0", 0, 0), Grad("member-job/p0", 0, 1)}, &answers);
  EXPECT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(answers.size(), 2u);
  for (size_t i = 0; i < answers.size(); ++i) {
    EXPECT_EQ(answers[i].header().kind(), v1::TensorHeader::PARAMS);
    EXPECT_EQ(answers[i].header().job_id(), "member-job/p0");
    EXPECT_EQ(answers[i].header().step(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(answers[i].header().count(), 4u);
  }
}

TEST_F(PushPullStreamAccess, AFrameForAnotherJobEndsTheStreamUnsummed) {
  std::vector<v1::TensorFrame> answers;
  grpc::Status st =
      Run({Grad("member-job/p0", 0, 0), Grad("other-job/p0", 0, 0)}, &answers);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("other-job/p0"), std::string::npos)
      << st.error_message();
  EXPECT_EQ(answers.size(), 1u);  // the member's own push was answered
}

TEST_F(PushPullStreamAccess, ARankOutsideTheWorldEndsTheStream) {
  std::vector<v1::TensorFrame> answers;
  grpc::Status st =
      Run({Grad("member-job/p0", 0, 0), Grad("member-job/p0", 1, 1)}, &answers);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_EQ(answers.size(), 1u);
}

TEST_F(PushPullStreamAccess, OnlyGradFramesArePushed) {
  v1::TensorFrame pull = Grad("member-job/p0", 0, 0);
  pull.mutable_header()->set_kind(v1::TensorHeader::PULL);
  std::vector<v1::TensorFrame> answers;
  grpc::Status st = Run({pull}, &answers);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_TRUE(answers.empty());
}

}  // namespace
}  // namespace gradsync
