// The control plane's largest messages against the message limit
// (common/message_limits.h), measured on worst-case content: a rank's JobDone
// with a full trace, and GetJob of a traced job of several ranks.
#include <cstdint>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "common/message_limits.h"
#include "common/spec/job_spec.h"
#include "common/trace/trace.h"
#include "server/coordinator/job_table.h"
#include "tests/server/job_table_test_util.h"

namespace gradsync {
namespace {

// A rank's JobDone with `n` trace events of the longest name and category
// the worker records, every field at its widest (negative ints are 10
// bytes, unix microseconds 8).
v1::WorkerMessage::JobDone TracedDone(const std::string& job, int rank, int n) {
  v1::WorkerMessage::JobDone d = Done(job, rank);
  for (int i = 0; i < n; ++i) {
    v1::TraceEvent* e = d.mutable_trace()->add_events();
    e->set_name("forward+backward");
    e->set_category("optimizer");
    e->set_thread(2);
    e->set_start_us(int64_t{1} << 52);
    e->set_dur_us(-1);
    e->set_step(-1);
    e->set_bucket(-1);
    e->set_layer(-1);
  }
  return d;
}

TEST(MessageLimits, AFullRankTraceFitsInOneControlMessage) {
  const v1::WorkerMessage::JobDone d =
      TracedDone("j-1", 0, static_cast<int>(TraceRecorder::kDefaultMaxEvents));
  std::printf("JobDone with %zu trace events: %.1f MiB (limit %.1f MiB)\n",
              TraceRecorder::kDefaultMaxEvents, d.ByteSizeLong() / 1048576.0,
              kMaxControlMessageBytes / 1048576.0);
  EXPECT_LT(d.ByteSizeLong() + 1024, static_cast<size_t>(kMaxControlMessageBytes));
}

TEST(MessageLimits, ATracedJobOfManyRanksStaysBelowTheLimit) {
  FakeEnv clock;
  WorkerRegistry workers;
  JobTableOptions o;
  o.id_prefix = "t-";
  JobTable table(o, &workers, &clock);
  constexpr int kRanks = 3;
  for (int r = 0; r < kRanks; ++r) {
    const std::string id = "w" + std::to_string(r);
    ASSERT_TRUE(workers.Register(id, id + ":7000", 0, clock.Now()).ok());
  }
  v1::JobSpec spec = Spec(v1::STRATEGY_ALLREDUCE, kRanks);
  spec.set_trace(true);
  Decisions d;
  absl::StatusOr<v1::Job> job = table.Submit(spec, &d);
  ASSERT_TRUE(job.ok()) << job.status();
  for (int r = 0; r < kRanks; ++r) {
    table.HandleJobDone(job->workers(r),
                        TracedDone(job->id(), r, Retention::kMaxTraceEventsPerRank), &d);
  }
  const v1::Job* done = table.Find(job->id());
  ASSERT_NE(done, nullptr);
  ASSERT_EQ(done->state(), v1::SUCCEEDED) << done->error();
  ASSERT_EQ(done->result().traces_size(), kRanks);
  EXPECT_GT(done->result().traces(0).dropped(), 0);
  std::printf("GetJob of a %d-rank traced job: %.1f MiB\n", kRanks,
              done->ByteSizeLong() / 1048576.0);
  EXPECT_LT(done->ByteSizeLong(), static_cast<size_t>(kMaxControlMessageBytes));
}

TEST(MessageLimits, DataFrameCapsFitTheLimit) {
  EXPECT_EQ(kMaxChunkBytes, kMaxFrameDataBytes);
  EXPECT_LE(kMaxChunkBytes + kMaxFrameHeaderBytes, kMaxMessageBytes);
  EXPECT_LE(static_cast<int64_t>(kPsPartitionBytes) + kMaxFrameHeaderBytes,
            kMaxMessageBytes);
}

}  // namespace
}  // namespace gradsync
