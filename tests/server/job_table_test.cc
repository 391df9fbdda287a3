// The coordinator's job table, in process: queueing, backfill, placement,
// cancel and failures (with the symptom grace on a fake clock); results,
// events, bench jobs, stalls and traces are in job_table_results_test.cc.
// No processes, sockets or sleeps.
#include "server/coordinator/job_table.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/env.h"
#include "common/ps_layout.h"
#include "server/coordinator/worker_registry.h"
#include "tests/server/job_table_test_util.h"

namespace gradsync {
namespace {

// ------------------------------------------------------------- queueing

TEST_F(JobTableTest, JobWaitsUntilEnoughWorkersAreIdle) {
  Join("w0");
  Decisions d;
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2), &d);
  EXPECT_EQ(id, "j-t-1");
  EXPECT_EQ(Job(id).state(), v1::QUEUED);
  EXPECT_TRUE(d.sends.empty());
  EXPECT_EQ(BusyWith("w0"), "");
  d = Join("w1");
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_EQ(SentTo(d, kAssignment), (Ids{"w0", "w1"}));
  EXPECT_EQ(BusyWith("w0"), id);
  EXPECT_EQ(BusyWith("w1"), id);
}

// A queued job says what it waits for (watch, status and list show it), as
// a STATE event each time that changes, and forgets it once placed.
TEST_F(JobTableTest, AQueuedJobSaysWhatItWaitsFor) {
  Join("w0");
  Join("w1");
  const std::string two = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
  ASSERT_EQ(Job(two).state(), v1::RUNNING);
  EXPECT_EQ(Job(two).waiting_for(), "");
  const std::string three = Submit(Spec(v1::STRATEGY_ALLREDUCE, 3));
  EXPECT_EQ(Job(three).state(), v1::QUEUED);
  EXPECT_EQ(Job(three).waiting_for(), "needs 3 workers, 2 registered, 0 idle");
  Join("w2");
  EXPECT_EQ(Job(three).waiting_for(), "needs 3 workers, 3 registered, 1 idle");
  JobDone("w0", Done(two, 0));
  EXPECT_EQ(Job(three).waiting_for(), "needs 3 workers, 3 registered, 2 idle");
  JobDone("w1", Done(two, 1));
  EXPECT_EQ(Job(three).state(), v1::RUNNING);
  EXPECT_EQ(Job(three).waiting_for(), "");
  WatchCursor cursor;
  std::vector<v1::JobEvent> events;
  Read(three, &cursor, &events);
  std::vector<std::string> queued;
  for (const v1::JobEvent& e : events) {
    if (e.kind() == v1::JobEvent::STATE && e.state() == v1::QUEUED) {
      queued.push_back(e.message());
    }
  }
  EXPECT_EQ(queued,
            (std::vector<std::string>{"queued", "needs 3 workers, 2 registered, 0 idle",
                                      "needs 3 workers, 3 registered, 1 idle",
                                      "needs 3 workers, 3 registered, 2 idle"}));
}

TEST_F(JobTableTest, AJobThatCannotRunYetDoesNotBlockSmallerOnes) {
  Join("w0");
  Join("w1");
  const std::string huge = Submit(Spec(v1::STRATEGY_ALLREDUCE, 50));
  const std::string big = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
  EXPECT_EQ(Job(huge).state(), v1::QUEUED);  // 50 > 2 registered: waits
  EXPECT_EQ(Job(big).state(), v1::RUNNING);  // ...without blocking
  env_.Advance(kBackfillReserveAfter * 2);   // it never reserves
  JobDone("w0", Done(big, 0));
  JobDone("w1", Done(big, 1));
  const std::string next = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  EXPECT_EQ(Job(next).state(), v1::RUNNING);
  EXPECT_EQ(Job(huge).state(), v1::QUEUED);
}

TEST_F(JobTableTest, SmallerJobsBackfillPastAWaitingJob) {
  Join("w0");
  Join("w1");
  Join("w2");
  const std::string pair = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));  // w0, w1
  const std::string all = Submit(Spec(v1::STRATEGY_ALLREDUCE, 3));   // must wait
  const std::string one = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  EXPECT_EQ(Job(all).state(), v1::QUEUED);
  EXPECT_EQ(Job(one).state(), v1::RUNNING);  // backfilled onto w2
  EXPECT_EQ(WorkersOf(one), (Ids{"w2"}));
  JobDone("w0", Done(pair, 0));
  JobDone("w1", Done(pair, 1));
  EXPECT_EQ(Job(all).state(), v1::QUEUED);  // w2 still busy
  JobDone("w2", Done(one, 0));
  EXPECT_EQ(Job(all).state(), v1::RUNNING);
}

TEST_F(JobTableTest, AWaitingJobReservesAfterBeingPassedTooOften) {
  Join("w0");
  Join("w1");
  Join("w2");
  const std::string pair = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));  // w0, w1
  const std::string all = Submit(Spec(v1::STRATEGY_ALLREDUCE, 3));
  for (int i = 0; i < kMaxBackfillPasses; ++i) {
    const std::string one = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
    ASSERT_EQ(Job(one).state(), v1::RUNNING) << "pass " << i;
    JobDone("w2", Done(one, 0));
  }
  const std::string late = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  EXPECT_EQ(Job(late).state(), v1::QUEUED);  // w2 is idle, but reserved
  JobDone("w0", Done(pair, 0));
  JobDone("w1", Done(pair, 1));
  EXPECT_EQ(Job(all).state(), v1::RUNNING);  // the head gets the cluster
  EXPECT_EQ(Job(late).state(), v1::QUEUED);
}

TEST_F(JobTableTest, AWaitingJobReservesAfterWaitingTooLong) {
  Join("w0");
  Join("w1");
  const std::string one = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));  // w0
  const std::string pair = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
  const std::string early = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  EXPECT_EQ(Job(early).state(), v1::RUNNING);  // backfilled onto w1
  JobDone("w1", Done(early, 0));
  env_.Advance(kBackfillReserveAfter);
  const std::string late = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  EXPECT_EQ(Job(late).state(), v1::QUEUED);  // `pair` has waited too long
  // Cancelling the head re-runs scheduling: `late` starts at once.
  Decisions d;
  ASSERT_TRUE(table_.Cancel(pair, &d).ok());
  EXPECT_EQ(Job(late).state(), v1::RUNNING);
  EXPECT_EQ(SentTo(d, kAssignment).size(), 1u);
  EXPECT_EQ(Job(one).state(), v1::RUNNING);
}

TEST(UniqueIdPrefix, DiffersWithinOneSecondAndAcrossStarts) {
  const absl::Time t = absl::FromUnixSeconds(1700000000);
  EXPECT_NE(UniqueIdPrefix(t, 7), UniqueIdPrefix(t + absl::Milliseconds(1), 7));
  EXPECT_NE(UniqueIdPrefix(t, 7), UniqueIdPrefix(t, 8));  // same ms
  EXPECT_EQ(UniqueIdPrefix(t, 7), UniqueIdPrefix(t, 7 + 36 * 36));
  EXPECT_EQ(UniqueIdPrefix(t, 7).back(), '-');
}

TEST_F(JobTableTest, BadSpecIsRefusedAndNeverQueued) {
  Join("w0");
  v1::JobSpec spec = Spec(v1::STRATEGY_ALLREDUCE, 1);
  spec.set_model("mlp:100-10");  // does not fit the dataset
  Decisions d;
  absl::StatusOr<v1::Job> job = table_.Submit(spec, &d);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message().rfind("model", 0), 0u) << job.status();
  spec = Spec(v1::STRATEGY_PS, 1);
  spec.set_ps_shards(4);  // only 3 known
  EXPECT_EQ(table_.Submit(spec, &d).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(table_.Jobs().empty());
  EXPECT_TRUE(d.sends.empty());
  EXPECT_EQ(BusyWith("w0"), "");
}

// ------------------------------------------------------------- placement

TEST_F(JobTableTest, RanksFollowRegistrationOrderAndAssignmentCarriesTheModel) {
  Join("w2");
  Join("w0");
  Join("w1");
  Decisions d;
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 3), &d);
  ASSERT_EQ(SentTo(d, kAssignment), (Ids{"w2", "w0", "w1"}));
  for (int r = 0; r < 3; ++r) {
    const v1::Assignment& a = d.sends[r].message.assignment();
    EXPECT_EQ(a.job_id(), id);
    EXPECT_EQ(a.rank(), r);
    EXPECT_EQ(a.world_size(), 3);
    EXPECT_EQ(
        std::vector<std::string>(a.peer_addresses().begin(), a.peer_addresses().end()),
        (Ids{"w2:7000", "w0:7000", "w1:7000"}));
    EXPECT_EQ(std::vector<std::string>(a.bulk_peer_addresses().begin(),
                                       a.bulk_peer_addresses().end()),
              (Ids{"w2:7001", "w0:7001", "w1:7001"}));
    EXPECT_EQ(std::vector<int>(a.layer_widths().begin(), a.layer_widths().end()),
              (std::vector<int>{784, 10}));
    EXPECT_EQ(a.num_params(), kModelParams);
    EXPECT_EQ(a.spec().dataset(), "fashion-mnist");  // validated, defaults in
    EXPECT_EQ(a.ps_shards_size(), 0);                // ring
  }
  EXPECT_EQ(Job(id).result().num_params(), static_cast<int64_t>(kModelParams));
  EXPECT_EQ(WorkersOf(id), (Ids{"w2", "w0", "w1"}));
}

TEST_F(JobTableTest, PsJobGetsItsShardsAndThePartitionBound) {
  Join("w0");
  Join("w1");
  v1::JobSpec spec = Spec(v1::STRATEGY_PS, 2);
  spec.set_ps_shards(3);
  table_.SetShardAddress(0, "self:5");  // shard 0 known after bind
  Decisions d;
  Submit(spec, &d);
  ASSERT_EQ(d.sends.size(), 2u);
  const v1::Assignment& a = d.sends[1].message.assignment();
  ASSERT_EQ(a.ps_shards_size(), 3);
  // Shards in order (partition p lives on shard p % 3, common/ps_layout.h);
  // no contiguous slices any more.
  const std::vector<std::string> addr = {"self:5", "ps1:1", "ps2:1"};
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(a.ps_shards(s).address(), addr[s]);
    // Unset: picked at placement for the built-in model on two hosts
    // ("w0", "w1"): 64 KiB, 15 partitions.
    EXPECT_EQ(a.ps_shards(s).partition_bytes(), kMinPsPartitionBytes);
    EXPECT_EQ(a.ps_shards(s).count(), 0u);
  }
}

// An unnamed partition size is picked at placement and written into the
// spec: small partitions for workers on several hosts (the pipeline needs
// them), 1 MiB for workers on one host (where each message costs CPU, not
// link time); a TorchScript model's size only its workers know.
TEST_F(JobTableTest, PsJobsPartitionSizeIsPickedAtPlacementByHosts) {
  ASSERT_TRUE(workers_.Register("a", "10.0.0.1:7000", 0, env_.Now()).ok());
  ASSERT_TRUE(workers_.Register("b", "10.0.0.1:7002", 0, env_.Now()).ok());
  table_.SetShardAddress(0, "self:5");
  Decisions d;
  const std::string one = Submit(Spec(v1::STRATEGY_PS, 2), &d);
  ASSERT_EQ(d.sends.size(), 2u);
  EXPECT_EQ(d.sends[1].message.assignment().ps_shards(0).partition_bytes(),
            kPreferredPsPartitionBytes);
  EXPECT_EQ(table_.Find(one)->spec().ps_partition_bytes(),
            static_cast<int64_t>(kPreferredPsPartitionBytes));
  // (Workers on two hosts: PsJobGetsItsShardsAndThePartitionBound, 64 KiB.)
}

TEST_F(JobTableTest, PsJobsPartitionSizeReachesTheWorkers) {
  Join("w0");
  Join("w1");
  v1::JobSpec spec = Spec(v1::STRATEGY_PS, 2);
  spec.set_ps_shards(2);
  spec.set_ps_partition_bytes(256 << 10);
  table_.SetShardAddress(0, "self:5");
  Decisions d;
  Submit(spec, &d);
  ASSERT_EQ(d.sends.size(), 2u);
  const v1::Assignment& a = d.sends[1].message.assignment();
  ASSERT_EQ(a.ps_shards_size(), 2);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(a.ps_shards(s).partition_bytes(), uint64_t{256} << 10);
  }
}

TEST_F(JobTableTest, CudaJobOnAWorkerWithoutGpuFailsAtPlacement) {
  Join("w0", /*gpus=*/1);
  Join("w1", /*gpus=*/0);
  v1::JobSpec spec = Spec(v1::STRATEGY_ALLREDUCE, 2);
  spec.set_device(v1::DEVICE_CUDA);
  const std::string cuda = Submit(spec);
  const std::string cpu = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  const v1::Job& failed = Job(cuda);
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_EQ(failed.error_code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(failed.error(), "job wants device=cuda but worker w1 (w1:7000) has no GPU");
  EXPECT_EQ(failed.workers_size(), 0);
  // The queue moves on: the next job runs on the first idle worker.
  EXPECT_EQ(Job(cpu).state(), v1::RUNNING);
  EXPECT_EQ(BusyWith("w0"), cpu);
  EXPECT_EQ(BusyWith("w1"), "");
}

// ------------------------------------------------------------- cancel

TEST_F(JobTableTest, CancelQueuedJobNeverPlacesIt) {
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  Decisions d;
  absl::StatusOr<v1::Job> job = table_.Cancel(id, &d);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::CANCELLED);
  EXPECT_EQ(job->error_code(), static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_EQ(job->error(), "cancelled by user");
  EXPECT_TRUE(d.sends.empty());
  EXPECT_TRUE(d.shard_end_jobs.empty());
  d = Join("w0");
  EXPECT_TRUE(d.sends.empty());
  EXPECT_EQ(BusyWith("w0"), "");
}

TEST_F(JobTableTest, CancelRunningJobCancelsWorkersWhoIdleAfterJobDone) {
  Join("w0");
  Join("w1");
  v1::JobSpec spec = Spec(v1::STRATEGY_PS, 2);
  spec.set_ps_shards(2);
  const std::string id = Submit(spec);
  Decisions d;
  ASSERT_TRUE(table_.Cancel(id, &d).ok());
  EXPECT_EQ(Job(id).state(), v1::CANCELLED);
  EXPECT_EQ(SentTo(d, kCancel), (Ids{"w0", "w1"}));
  EXPECT_EQ(d.sends[0].message.cancel().job_id(), id);
  ASSERT_EQ(d.shard_end_jobs.size(), 1u);
  EXPECT_EQ(d.shard_end_jobs[0].job_id, id);
  EXPECT_EQ(d.shard_end_jobs[0].shard_addresses, (Ids{"ps0:1", "ps1:1"}));
  // Busy until each reports JobDone; the job stays CANCELLED.
  EXPECT_EQ(BusyWith("w0"), id);
  JobDone("w0", Done(id, 0, absl::CancelledError("job cancelled")));
  EXPECT_EQ(BusyWith("w0"), "");
  EXPECT_EQ(BusyWith("w1"), id);
  JobDone("w1", Done(id, 1, absl::CancelledError("job cancelled")));
  EXPECT_EQ(BusyWith("w1"), "");
  EXPECT_EQ(Job(id).state(), v1::CANCELLED);
  EXPECT_EQ(Job(id).error(), "cancelled by user");
  // Cancelling again returns it; a finished or unknown job cannot be.
  EXPECT_TRUE(table_.Cancel(id, &d).ok());
  EXPECT_EQ(table_.Cancel("j-nope", &d).status().code(), absl::StatusCode::kNotFound);
  const std::string done = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  JobDone("w0", Done(done, 0));
  EXPECT_EQ(table_.Cancel(done, &d).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// ------------------------------------------------------------- failure

TEST_F(JobTableTest, LostWorkerFailsItsJobNamingIt) {
  Join("w0");
  Join("w1");
  Join("w2");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 3));
  Decisions d;
  table_.WorkerLost("w2", "its session broke", &d);
  const v1::Job& job = Job(id);
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(job.error_code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_EQ(job.error(), "worker w2 (rank 2, w2:7000) lost: its session broke");
  EXPECT_EQ(SentTo(d, kCancel), (Ids{"w0", "w1"}));  // not the dead one
  EXPECT_FALSE(workers_.IsLive("w2"));
  Decisions again;
  table_.WorkerLost("w2", "twice", &again);  // no-op
  EXPECT_TRUE(again.sends.empty());
  EXPECT_EQ(Job(id).error(), job.error());
}

TEST_F(JobTableTest, SymptomErrorWaitsForTheGracePeriodThenFails) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
  JobDone("w0", Done(id, 0, absl::UnavailableError("peer 1 went away")));
  Decisions d;
  table_.ExpireSymptoms(&d);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  env_.Advance(kSymptomGrace - absl::Milliseconds(1));
  table_.ExpireSymptoms(&d);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_TRUE(d.sends.empty());
  env_.Advance(absl::Milliseconds(1));
  table_.ExpireSymptoms(&d);
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).error_code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_EQ(Job(id).error(), "rank 0 (worker w0): peer 1 went away [ranks: 0=w0 1=w1]");
  EXPECT_EQ(SentTo(d, kCancel), (Ids{"w1"}));  // rank 0 is done already
}

TEST_F(JobTableTest, LostWorkerReportedWithinTheGraceIsTheError) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
  JobDone("w0", Done(id, 0, absl::DeadlineExceededError("step 3 timed out")));
  env_.Advance(kSymptomGrace / 2);
  Decisions d;
  table_.WorkerLost("w1", "no heartbeat for 6s", &d);
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).error(), "worker w1 (rank 1, w1:7000) lost: no heartbeat for 6s");
}

TEST_F(JobTableTest, SymptomHeldWhenAllRanksEndFailsWithIt) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
  JobDone("w0", Done(id, 0, absl::AbortedError("ring aborted")));
  JobDone("w1", Done(id, 1));
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).error_code(), static_cast<int>(absl::StatusCode::kAborted));
}

TEST_F(JobTableTest, NonSymptomErrorFailsTheJobAtOnce) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
  Decisions d = JobDone("w1", Done(id, 1, absl::NotFoundError("/no/data: missing")));
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).error_code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_EQ(Job(id).error(), "rank 1 (worker w1): /no/data: missing");
  EXPECT_EQ(SentTo(d, kCancel), (Ids{"w0"}));
  EXPECT_EQ(BusyWith("w1"), "");
  EXPECT_EQ(BusyWith("w0"), id);  // until its JobDone
}

TEST_F(JobTableTest, DifferentInitialParametersAreDataLoss) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
  v1::WorkerMessage::Progress p;
  p.set_job_id(id);
  p.set_rank(0);
  p.set_init_checksum("aaaa");
  Decisions d;
  table_.HandleProgress("w0", p, &d);
  EXPECT_EQ(Job(id).result().init_checksum(), "aaaa");
  p.set_rank(1);
  p.set_init_checksum("bbbb");
  table_.HandleProgress("w1", p, &d);
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).error_code(), static_cast<int>(absl::StatusCode::kDataLoss));
  EXPECT_EQ(Job(id).error(),
            "initial parameters differ: rank 0 has aaaa, rank 1 has bbbb");
}

TEST_F(JobTableTest, ReportsFromAWorkerNotHoldingTheRankAreIgnored) {
  Join("w0");
  Join("w1");
  Join("w2");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
  v1::WorkerMessage::Progress p;
  p.set_job_id(id);
  p.set_rank(0);  // w0's rank
  p.set_step(9);
  Decisions d;
  table_.HandleProgress("w2", p, &d);
  JobDone("w2", Done(id, 0, absl::InternalError("not mine")));
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_EQ(Job(id).step(), 0);
  EXPECT_EQ(BusyWith("w0"), id);
  EXPECT_FALSE(d.events_changed);
}

}  // namespace
}  // namespace gradsync
