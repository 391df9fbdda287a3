// The coordinator's job table, in process: queueing, placement, cancel,
// failures (with the symptom grace on a fake clock), results and events.
// No processes, sockets or sleeps.
#include "server/coordinator/job_table.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/ps_layout.h"
#include "common/spec/model_spec.h"
#include "server/coordinator/clock.h"
#include "server/coordinator/worker_registry.h"
#include "tests/server/job_table_test_util.h"

namespace gradsync {
namespace {

class JobTableTest : public ::testing::Test {
 protected:
  JobTableTest() : table_(Options(), &workers_, &clock_) {}

  static JobTableOptions Options() {
    JobTableOptions o;
    o.ps_addresses = {"ps0:1", "ps1:1", "ps2:1"};
    o.id_prefix = "t-";
    return o;
  }

  // Registers a worker (peer "<id>:7000") and schedules, as a Join does.
  Decisions Join(const std::string& id, int gpus = 0) {
    EXPECT_TRUE(workers_.Register(id, id + ":7000", gpus, clock_.Now()).ok());
    Decisions d;
    table_.Schedule(&d);
    return d;
  }

  std::string Submit(const v1::JobSpec& spec, Decisions* d) {
    absl::StatusOr<v1::Job> job = table_.Submit(spec, d);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id() : "";
  }

  std::string Submit(const v1::JobSpec& spec) {
    Decisions d;
    return Submit(spec, &d);
  }

  const v1::Job& Job(const std::string& id) {
    const v1::Job* job = table_.Find(id);
    EXPECT_NE(job, nullptr) << id;
    static const v1::Job* const kEmpty = new v1::Job();
    return job == nullptr ? *kEmpty : *job;
  }

  Decisions JobDone(const std::string& worker, const v1::WorkerMessage::JobDone& d) {
    Decisions out;
    table_.HandleJobDone(worker, d, &out);
    return out;
  }

  std::string BusyWith(const std::string& worker) {
    return workers_.Find(worker)->job_id;
  }

  std::vector<std::string> WorkersOf(const std::string& id) {
    return {Job(id).workers().begin(), Job(id).workers().end()};
  }

  // Reads job `id`'s new events into `events`; returns whether it ended.
  bool Read(const std::string& id, WatchCursor* cursor,
            std::vector<v1::JobEvent>* events) {
    events->clear();
    absl::StatusOr<bool> ended = table_.ReadEvents(id, cursor, events);
    EXPECT_TRUE(ended.ok()) << ended.status();
    return ended.value_or(false);
  }

  FakeClock clock_;
  WorkerRegistry workers_;
  JobTable table_;
};

// Worker ids that get a message of `kind` in `d`, in order.
std::vector<std::string> SentTo(const Decisions& d,
                                v1::CoordinatorMessage::MsgCase kind) {
  std::vector<std::string> to;
  for (const WorkerSend& s : d.sends) {
    if (s.message.msg_case() == kind) to.push_back(s.worker_id);
  }
  return to;
}

using Ids = std::vector<std::string>;
constexpr auto kAssignment = v1::CoordinatorMessage::kAssignment;
constexpr auto kCancel = v1::CoordinatorMessage::kCancel;

// ------------------------------------------------------------- queueing

TEST_F(JobTableTest, JobWaitsUntilEnoughWorkersAreIdle) {
  Join("w0");
  Decisions d;
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 2), &d);
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

TEST_F(JobTableTest, AJobThatCannotRunYetDoesNotBlockSmallerOnes) {
  Join("w0");
  Join("w1");
  const std::string huge = Submit(Spec(v1::STRATEGY_RING, 50));
  const std::string big = Submit(Spec(v1::STRATEGY_RING, 2));
  EXPECT_EQ(Job(huge).state(), v1::QUEUED);  // 50 > 2 registered: waits
  EXPECT_EQ(Job(big).state(), v1::RUNNING);  // ...without blocking
  clock_.Advance(kBackfillReserveAfter * 2);  // it never reserves
  JobDone("w0", Done(big, 0));
  JobDone("w1", Done(big, 1));
  const std::string next = Submit(Spec(v1::STRATEGY_RING, 1));
  EXPECT_EQ(Job(next).state(), v1::RUNNING);
  EXPECT_EQ(Job(huge).state(), v1::QUEUED);
}

TEST_F(JobTableTest, SmallerJobsBackfillPastAWaitingJob) {
  Join("w0");
  Join("w1");
  Join("w2");
  const std::string pair = Submit(Spec(v1::STRATEGY_RING, 2));  // w0, w1
  const std::string all = Submit(Spec(v1::STRATEGY_RING, 3));   // must wait
  const std::string one = Submit(Spec(v1::STRATEGY_RING, 1));
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
  const std::string pair = Submit(Spec(v1::STRATEGY_RING, 2));  // w0, w1
  const std::string all = Submit(Spec(v1::STRATEGY_RING, 3));
  for (int i = 0; i < kMaxBackfillPasses; ++i) {
    const std::string one = Submit(Spec(v1::STRATEGY_RING, 1));
    ASSERT_EQ(Job(one).state(), v1::RUNNING) << "pass " << i;
    JobDone("w2", Done(one, 0));
  }
  const std::string late = Submit(Spec(v1::STRATEGY_RING, 1));
  EXPECT_EQ(Job(late).state(), v1::QUEUED);  // w2 is idle, but reserved
  JobDone("w0", Done(pair, 0));
  JobDone("w1", Done(pair, 1));
  EXPECT_EQ(Job(all).state(), v1::RUNNING);  // the head gets the cluster
  EXPECT_EQ(Job(late).state(), v1::QUEUED);
}

TEST_F(JobTableTest, AWaitingJobReservesAfterWaitingTooLong) {
  Join("w0");
  Join("w1");
  const std::string one = Submit(Spec(v1::STRATEGY_RING, 1));  // w0
  const std::string pair = Submit(Spec(v1::STRATEGY_RING, 2));
  const std::string early = Submit(Spec(v1::STRATEGY_RING, 1));
  EXPECT_EQ(Job(early).state(), v1::RUNNING);  // backfilled onto w1
  JobDone("w1", Done(early, 0));
  clock_.Advance(kBackfillReserveAfter);
  const std::string late = Submit(Spec(v1::STRATEGY_RING, 1));
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
  v1::JobSpec spec = Spec(v1::STRATEGY_RING, 1);
  spec.set_model("mlp:100-10");  // does not fit the dataset
  Decisions d;
  absl::StatusOr<v1::Job> job = table_.Submit(spec, &d);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message().rfind("model", 0), 0u) << job.status();
  spec = Spec(v1::STRATEGY_PS, 1);
  spec.set_ps_shards(4);  // only 3 known
  EXPECT_EQ(table_.Submit(spec, &d).status().code(),
            absl::StatusCode::kInvalidArgument);
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
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 3), &d);
  ASSERT_EQ(SentTo(d, kAssignment), (Ids{"w2", "w0", "w1"}));
  for (int r = 0; r < 3; ++r) {
    const v1::Assignment& a = d.sends[r].message.assignment();
    EXPECT_EQ(a.job_id(), id);
    EXPECT_EQ(a.rank(), r);
    EXPECT_EQ(a.world_size(), 3);
    EXPECT_EQ(std::vector<std::string>(a.peer_addresses().begin(),
                                       a.peer_addresses().end()),
              (Ids{"w2:7000", "w0:7000", "w1:7000"}));
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
    EXPECT_EQ(a.ps_shards(s).partition_bytes(), kPsPartitionBytes);
    EXPECT_EQ(a.ps_shards(s).count(), 0u);
  }
}

TEST_F(JobTableTest, CudaJobOnAWorkerWithoutGpuFailsAtPlacement) {
  Join("w0", /*gpus=*/1);
  Join("w1", /*gpus=*/0);
  v1::JobSpec spec = Spec(v1::STRATEGY_RING, 2);
  spec.set_device(v1::DEVICE_CUDA);
  const std::string cuda = Submit(spec);
  const std::string cpu = Submit(Spec(v1::STRATEGY_RING, 1));
  const v1::Job& failed = Job(cuda);
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_EQ(failed.error_code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(failed.error(),
            "job wants device=cuda but worker w1 (w1:7000) has no GPU");
  EXPECT_EQ(failed.workers_size(), 0);
  // The queue moves on: the next job runs on the first idle worker.
  EXPECT_EQ(Job(cpu).state(), v1::RUNNING);
  EXPECT_EQ(BusyWith("w0"), cpu);
  EXPECT_EQ(BusyWith("w1"), "");
}

// ------------------------------------------------------------- cancel

TEST_F(JobTableTest, CancelQueuedJobNeverPlacesIt) {
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 1));
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
  EXPECT_EQ(table_.Cancel("j-nope", &d).status().code(),
            absl::StatusCode::kNotFound);
  const std::string done = Submit(Spec(v1::STRATEGY_RING, 1));
  JobDone("w0", Done(done, 0));
  EXPECT_EQ(table_.Cancel(done, &d).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// ------------------------------------------------------------- failure

TEST_F(JobTableTest, LostWorkerFailsItsJobNamingIt) {
  Join("w0");
  Join("w1");
  Join("w2");
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 3));
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
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 2));
  JobDone("w0", Done(id, 0, absl::UnavailableError("peer 1 went away")));
  Decisions d;
  table_.ExpireSymptoms(&d);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  clock_.Advance(kSymptomGrace - absl::Milliseconds(1));
  table_.ExpireSymptoms(&d);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_TRUE(d.sends.empty());
  clock_.Advance(absl::Milliseconds(1));
  table_.ExpireSymptoms(&d);
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).error_code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_EQ(Job(id).error(),
            "rank 0 (worker w0): peer 1 went away [ranks: 0=w0 1=w1]");
  EXPECT_EQ(SentTo(d, kCancel), (Ids{"w1"}));  // rank 0 is done already
}

TEST_F(JobTableTest, LostWorkerReportedWithinTheGraceIsTheError) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 2));
  JobDone("w0", Done(id, 0, absl::DeadlineExceededError("step 3 timed out")));
  clock_.Advance(kSymptomGrace / 2);
  Decisions d;
  table_.WorkerLost("w1", "no heartbeat for 6s", &d);
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).error(), "worker w1 (rank 1, w1:7000) lost: no heartbeat for 6s");
}

TEST_F(JobTableTest, SymptomHeldWhenAllRanksEndFailsWithIt) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 2));
  JobDone("w0", Done(id, 0, absl::AbortedError("ring aborted")));
  JobDone("w1", Done(id, 1));
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).error_code(), static_cast<int>(absl::StatusCode::kAborted));
}

TEST_F(JobTableTest, NonSymptomErrorFailsTheJobAtOnce) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 2));
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
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 2));
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
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 2));
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

// ------------------------------------------------------------- results

TEST_F(JobTableTest, FinalizeAveragesOverRanks) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 2));
  clock_.Advance(absl::Seconds(10));
  v1::WorkerMessage::JobDone d0 = Done(id, 0), d1 = Done(id, 1);
  d0.set_comm_seconds(1);
  d1.set_comm_seconds(3);
  d0.set_compute_seconds(4);
  d1.set_compute_seconds(6);
  d0.set_last_step_loss(0.5);
  d1.set_last_step_loss(0.7);
  d0.set_samples(1000);
  d1.set_samples(1000);
  d0.set_wall_seconds(4);
  d1.set_wall_seconds(5);
  d0.set_test_accuracy(0.85);
  d1.set_test_accuracy(-1);
  d0.set_device("cpu");
  d0.add_bucket_bytes(544);
  d0.add_bucket_bytes(3216);
  d0.add_bucket_algorithms("tree");
  d0.add_bucket_algorithms("ring");
  d1.add_bucket_algorithms("other");  // only rank 0's are reported
  JobDone("w1", d1);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  Decisions d = JobDone("w0", d0);
  const v1::Job& job = Job(id);
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << job.error();
  EXPECT_EQ(job.error_code(), 0);
  EXPECT_EQ(job.error(), "");
  const v1::JobResult& r = job.result();
  EXPECT_DOUBLE_EQ(r.comm_seconds(), 2);
  EXPECT_DOUBLE_EQ(r.compute_seconds(), 5);
  EXPECT_DOUBLE_EQ(r.final_train_loss(), 0.6);
  EXPECT_DOUBLE_EQ(r.test_accuracy(), 0.85);  // rank 0's
  EXPECT_DOUBLE_EQ(r.samples_per_second(), 2000.0 / 5);  // slowest rank's wall
  EXPECT_DOUBLE_EQ(r.wall_seconds(), 10);  // from the injected clock
  EXPECT_EQ(r.steps(), 100);
  EXPECT_EQ(job.step(), 100);
  EXPECT_EQ(r.global_batch(), 64);
  EXPECT_EQ(r.ps_shards(), 0);
  EXPECT_EQ(r.device(), "cpu");
  ASSERT_EQ(r.bucket_bytes_size(), 2);  // rank 0's layout
  EXPECT_EQ(r.bucket_bytes(0), 544);
  EXPECT_EQ(r.bucket_bytes(1), 3216);
  ASSERT_EQ(r.bucket_algorithms_size(), 2);  // rank 0's, bucket order
  EXPECT_EQ(r.bucket_algorithms(0), "tree");
  EXPECT_EQ(r.bucket_algorithms(1), "ring");
  EXPECT_EQ(r.param_checksums_size(), 2);
  EXPECT_EQ(r.comm_seconds_per_worker_size(), 2);
  EXPECT_TRUE(d.sends.empty());  // every rank is done: nothing to cancel
  EXPECT_TRUE(d.shard_end_jobs.empty());  // ring
}

TEST_F(JobTableTest, RingReplicasThatDivergeAreDataLoss) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 2));
  v1::WorkerMessage::JobDone d1 = Done(id, 1);
  d1.set_param_checksum("beef");
  JobDone("w0", Done(id, 0));
  JobDone("w1", d1);
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).error_code(), static_cast<int>(absl::StatusCode::kDataLoss));
  EXPECT_EQ(Job(id).error(),
            "ring replicas diverged: rank 0 has c0ffee, rank 1 has beef");
}

TEST_F(JobTableTest, FinishedPsJobIsEndedOnItsShards) {
  Join("w0");
  v1::JobSpec spec = Spec(v1::STRATEGY_PS, 1);
  spec.set_ps_shards(2);
  const std::string id = Submit(spec);
  Decisions d = JobDone("w0", Done(id, 0));
  EXPECT_EQ(Job(id).state(), v1::SUCCEEDED);
  EXPECT_EQ(Job(id).result().ps_shards(), 2);
  ASSERT_EQ(d.shard_end_jobs.size(), 1u);
  EXPECT_EQ(d.shard_end_jobs[0].shard_addresses, (Ids{"ps0:1", "ps1:1"}));
  EXPECT_EQ(d.shard_end_jobs[0].reason, "job " + id + " ended");
}

// ------------------------------------------------------------- events

// ------------------------------------------------------------- bench jobs

v1::JobSpec BenchSpec(v1::BenchOp op, int workers) {
  v1::JobSpec s;
  s.set_kind(v1::JOB_KIND_BENCH);
  s.set_workers(workers);
  s.mutable_bench()->set_op(op);
  s.mutable_bench()->add_sizes(4096);
  s.mutable_bench()->add_sizes(1048580);
  s.mutable_bench()->set_iters(3);
  return s;
}

// Rank `rank`'s JobDone: row i's iteration t took seconds[i][t].
v1::WorkerMessage::JobDone BenchDone(
    const std::string& job, int rank,
    const std::vector<std::vector<double>>& seconds) {
  v1::WorkerMessage::JobDone d = Done(job, rank);
  d.mutable_bench()->set_alpha_seconds(1e-5);
  d.mutable_bench()->set_beta_bytes_per_second(1e9);
  const int64_t sizes[] = {4096, 1048580};
  for (size_t i = 0; i < seconds.size(); ++i) {
    v1::BenchRankRow* row = d.mutable_bench()->add_rows();
    row->set_bytes(sizes[i]);
    row->set_algorithm("ring");
    row->set_ok(true);
    for (double t : seconds[i]) row->add_iteration_seconds(t);
  }
  return d;
}

TEST_F(JobTableTest, BenchJobNeedsNoModelAndMergesSlowestRankMedians) {
  Join("w0");
  Join("w1");
  Decisions placed;
  const std::string id = Submit(BenchSpec(v1::BENCH_OP_ALLREDUCE, 2), &placed);
  ASSERT_EQ(SentTo(placed, kAssignment), (Ids{"w0", "w1"}));
  const v1::Assignment& a = placed.sends[0].message.assignment();
  EXPECT_EQ(a.num_params(), 1048580u / 4);  // the largest size
  EXPECT_EQ(a.layer_widths_size(), 0);
  EXPECT_EQ(a.ps_shards_size(), 0);  // allreduce needs no PS
  JobDone("w0", BenchDone(id, 0, {{1, 5, 3}, {2, 2, 2}}));
  v1::WorkerMessage::JobDone d1 = BenchDone(id, 1, {{2, 1, 9}, {1, 4, 1}});
  d1.mutable_bench()->mutable_rows(1)->set_ok(false);
  d1.mutable_bench()->mutable_rows(1)->set_error("element 7: got 1, want 3");
  Decisions d = JobDone("w1", d1);
  const v1::Job& job = Job(id);
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << job.error();
  const v1::BenchResult& b = job.result().bench();
  EXPECT_DOUBLE_EQ(b.alpha_seconds(), 1e-5);
  EXPECT_EQ(b.iters(), 3);
  ASSERT_EQ(b.rows_size(), 2);
  // Slowest per iteration: {2, 5, 9} -> median 5; {2, 4, 2} -> median 2.
  EXPECT_EQ(std::vector<double>(b.rows(0).iteration_seconds().begin(),
                                b.rows(0).iteration_seconds().end()),
            (std::vector<double>{2, 5, 9}));
  EXPECT_DOUBLE_EQ(b.rows(0).time_seconds(), 5);
  EXPECT_DOUBLE_EQ(b.rows(1).time_seconds(), 2);
  EXPECT_EQ(b.rows(0).rank_iteration_seconds_size(), 6);  // rank-major
  EXPECT_DOUBLE_EQ(b.rows(0).rank_iteration_seconds(3), 2);
  EXPECT_TRUE(b.rows(0).ok());
  EXPECT_FALSE(b.rows(1).ok());
  EXPECT_EQ(b.rows(1).error(), "rank 1: element 7: got 1, want 3");
  EXPECT_TRUE(d.shard_end_jobs.empty());
}

TEST_F(JobTableTest, BenchRanksThatDisagreeOnTheRowsFailTheJob) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(BenchSpec(v1::BENCH_OP_BROADCAST, 2));
  JobDone("w0", BenchDone(id, 0, {{1, 1, 1}, {1, 1, 1}}));
  JobDone("w1", BenchDone(id, 1, {{1, 1, 1}}));
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_EQ(Job(id).error_code(), static_cast<int>(absl::StatusCode::kInternal));
}

TEST_F(JobTableTest, PushPullBenchGetsShardsAndEndsOnThem) {
  Join("w0");
  v1::JobSpec spec = BenchSpec(v1::BENCH_OP_PUSHPULL, 1);
  spec.set_ps_shards(2);
  Decisions placed;
  const std::string id = Submit(spec, &placed);
  ASSERT_EQ(placed.sends.size(), 1u);
  EXPECT_EQ(placed.sends[0].message.assignment().ps_shards_size(), 2);
  Decisions d = JobDone("w0", BenchDone(id, 0, {{1, 1, 1}, {1, 1, 1}}));
  EXPECT_EQ(Job(id).state(), v1::SUCCEEDED) << Job(id).error();
  ASSERT_EQ(d.shard_end_jobs.size(), 1u);
  EXPECT_EQ(d.shard_end_jobs[0].shard_addresses, (Ids{"ps0:1", "ps1:1"}));
}

TEST_F(JobTableTest, WatchersSeeStateProgressAndEpochEventsInOrder) {
  Join("w0");
  Join("w1");
  Decisions d;
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 2), &d);
  EXPECT_TRUE(d.events_changed);
  WatchCursor cursor;
  EXPECT_TRUE(table_.HasNews(id, cursor));
  std::vector<v1::JobEvent> events;
  ASSERT_FALSE(Read(id, &cursor, &events));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind(), v1::JobEvent::STATE);
  EXPECT_EQ(events[0].state(), v1::QUEUED);
  EXPECT_EQ(events[0].message(), "queued");
  EXPECT_EQ(events[1].state(), v1::RUNNING);
  EXPECT_EQ(events[1].message(), "running on w0,w1");
  EXPECT_FALSE(table_.HasNews(id, cursor));

  // Progress: rank 1's rate counts, rank 0 drives the event.
  v1::WorkerMessage::Progress p;
  p.set_job_id(id);
  p.set_rank(1);
  p.set_samples_per_second(100);
  d = Decisions();
  table_.HandleProgress("w1", p, &d);
  EXPECT_FALSE(table_.HasNews(id, cursor));
  p.set_rank(0);
  p.set_step(7);
  p.set_total_steps(100);
  p.set_samples_per_second(150);
  p.set_comm_seconds(1);
  p.set_compute_seconds(3);
  table_.HandleProgress("w0", p, &d);
  EXPECT_TRUE(d.events_changed);
  EXPECT_TRUE(table_.HasNews(id, cursor));
  ASSERT_FALSE(Read(id, &cursor, &events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind(), v1::JobEvent::PROGRESS);
  EXPECT_EQ(events[0].step(), 7);
  EXPECT_DOUBLE_EQ(events[0].samples_per_second(), 250);
  EXPECT_DOUBLE_EQ(events[0].comm_share(), 0.25);
  EXPECT_EQ(Job(id).step(), 7);

  // An epoch event once every rank finished the epoch.
  v1::WorkerMessage::EpochDone e;
  e.set_job_id(id);
  e.set_epoch(1);
  e.set_rank(1);
  e.set_train_loss(0.4);
  e.set_seconds(2);
  table_.HandleEpochDone("w1", e, &d);
  EXPECT_FALSE(table_.HasNews(id, cursor));
  e.set_rank(0);
  e.set_train_loss(0.6);
  e.set_seconds(3);
  e.set_test_accuracy(0.8);
  table_.HandleEpochDone("w0", e, &d);
  ASSERT_FALSE(Read(id, &cursor, &events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind(), v1::JobEvent::EPOCH);
  EXPECT_DOUBLE_EQ(events[0].epoch_result().train_loss(), 0.5);
  EXPECT_DOUBLE_EQ(events[0].epoch_result().seconds(), 3);
  EXPECT_DOUBLE_EQ(events[0].epoch_result().test_accuracy(), 0.8);
  ASSERT_EQ(Job(id).result().epochs_size(), 1);

  // The terminal STATE event carries the job; the watch then ends.
  JobDone("w0", Done(id, 0));
  JobDone("w1", Done(id, 1));
  ASSERT_TRUE(Read(id, &cursor, &events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].state(), v1::SUCCEEDED);
  EXPECT_EQ(events[0].message(), "SUCCEEDED");
  EXPECT_EQ(events[0].job().state(), v1::SUCCEEDED);
  EXPECT_EQ(table_.ReadEvents("j-nope", &cursor, &events).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(JobTableTest, FailureEventCarriesTheStatus) {
  Join("w0");
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 1));
  Decisions d;
  table_.WorkerLost("w0", "gone", &d);
  WatchCursor cursor;
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(Read(id, &cursor, &events));
  const v1::JobEvent& last = events.back();
  EXPECT_EQ(last.state(), v1::FAILED);
  EXPECT_EQ(last.message(), "worker w0 (rank 0, w0:7000) lost: gone");
  EXPECT_EQ(last.job().error_code(),
            static_cast<int>(absl::StatusCode::kUnavailable));
}

// ---------------------------------------------------------------- stalls

TEST_F(JobTableTest, StallReportsBecomeEventsAndOneStatusLinePerRank) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_RING, 2));
  WatchCursor cursor;
  std::vector<v1::JobEvent> events;
  Read(id, &cursor, &events);
  v1::WorkerMessage::Stall s;
  s.set_job_id(id);
  s.set_rank(1);
  s.set_step(42);
  s.set_bucket(0);
  s.set_phase("reduce-scatter");
  s.set_waiting_for("rank 0 (w0:7000)");
  s.set_waited_ms(15234);
  Decisions d;
  table_.HandleStall("w0", s, &d);  // not w0's rank: ignored
  EXPECT_EQ(Job(id).stalls_size(), 0);
  table_.HandleStall("w1", s, &d);
  EXPECT_TRUE(d.events_changed);
  const std::string line =
      "rank 1 waiting 15.2 s for rank 0 (w0:7000) at step 42 bucket 0 "
      "reduce-scatter";
  auto stalls = [&] {
    return Ids(Job(id).stalls().begin(), Job(id).stalls().end());
  };
  EXPECT_EQ(stalls(), (Ids{line}));
  ASSERT_FALSE(Read(id, &cursor, &events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind(), v1::JobEvent::STALL);
  EXPECT_EQ(events[0].message(), line);
  // The end of the wait replaces the rank's line.
  s.set_resolved(true);
  s.set_waited_ms(16000);
  table_.HandleStall("w1", s, &d);
  EXPECT_EQ(stalls(),
            (Ids{"rank 1 waited 16.0 s for rank 0 (w0:7000) at step 42 bucket "
                 "0 reduce-scatter (resolved)"}));
  // After the job ended its status keeps the last report.
  JobDone("w0", Done(id, 0, absl::InternalError("broken")));
  ASSERT_EQ(Job(id).state(), v1::FAILED);
  s.set_resolved(false);
  table_.HandleStall("w1", s, &d);
  EXPECT_EQ(Job(id).stalls_size(), 1);
  EXPECT_NE(Job(id).stalls(0).find("(resolved)"), std::string::npos);
}

}  // namespace
}  // namespace gradsync

namespace gradsync {
namespace {

// spec.trace: each rank's timeline moves into the result (worker ids set),
// only for the newest kMaxTracedJobs jobs, and never for a failed job.
TEST_F(JobTableTest, TracesAreKeptForTheNewestSucceededJobsOnly) {
  Join("w0");
  Join("w1");
  v1::JobSpec spec = Spec(v1::STRATEGY_RING, 2);
  spec.set_trace(true);
  auto traced_done = [](const std::string& id, int rank) {
    v1::WorkerMessage::JobDone d = Done(id, rank);
    v1::TraceEvent* e = d.mutable_trace()->add_events();
    e->set_name("sync bucket");
    e->set_dur_us(5);
    return d;
  };
  std::vector<std::string> ids;
  for (int j = 0; j < 6; ++j) {
    ids.push_back(Submit(spec));
    const Ids ranks = WorkersOf(ids.back());
    ASSERT_EQ(ranks.size(), 2u);
    JobDone(ranks[0], traced_done(ids.back(), 0));
    JobDone(ranks[1], traced_done(ids.back(), 1));
    const v1::Job& job = Job(ids.back());
    ASSERT_EQ(job.state(), v1::SUCCEEDED) << job.error();
    ASSERT_EQ(job.result().traces_size(), 2);
    EXPECT_EQ(job.result().traces(1).rank(), 1);
    EXPECT_EQ(job.result().traces(1).worker_id(), job.workers(1));
    EXPECT_EQ(job.result().traces(0).events(0).name(), "sync bucket");
  }
  for (int j = 0; j < 6; ++j) {
    EXPECT_EQ(Job(ids[j]).result().traces_size(), j < 2 ? 0 : 2) << j;
  }
  // A failed traced job keeps no timeline.
  const std::string failed = Submit(spec);
  v1::WorkerMessage::JobDone bad = traced_done(failed, 1);
  bad.set_param_checksum("beef");
  JobDone(WorkersOf(failed)[0], traced_done(failed, 0));
  JobDone(WorkersOf(failed)[1], bad);
  EXPECT_EQ(Job(failed).state(), v1::FAILED);
  EXPECT_EQ(Job(failed).result().traces_size(), 0);
}

}  // namespace
}  // namespace gradsync
