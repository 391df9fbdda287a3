// The job table's elastic jobs (job_table_elastic.cc) on a fake clock: a lost
// rank ends a generation, the survivors are cancelled and waited for, the
// next generation is placed with its own data-plane id from the committed
// checkpoint, reports of an ended generation are fenced, and the waits end.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "server/coordinator/job_table.h"
#include "tests/server/job_table_test_util.h"

namespace gradsync {
namespace {

v1::JobSpec Elastic(v1::Strategy strategy, int workers, int min_workers) {
  v1::JobSpec s = Spec(strategy, workers);
  s.set_elastic(true);
  s.set_min_workers(min_workers);
  s.set_checkpoint_every(10);
  s.set_elastic_wait_ms(1000);
  return s;
}

std::vector<v1::Assignment> Assignments(const Decisions& d) {
  std::vector<v1::Assignment> out;
  for (const WorkerSend& s : d.sends) {
    if (s.message.has_assignment()) out.push_back(s.message.assignment());
  }
  return out;
}

std::vector<std::string> Cancels(const Decisions& d, std::string* job_id) {
  std::vector<std::string> out;
  for (const WorkerSend& s : d.sends) {
    if (!s.message.has_cancel()) continue;
    out.push_back(s.worker_id);
    *job_id = s.message.cancel().job_id();
  }
  return out;
}

v1::WorkerMessage::Progress Progress(const std::string& job, int rank, int64_t step,
                                     bool first) {
  v1::WorkerMessage::Progress p;
  p.set_job_id(job);
  p.set_rank(rank);
  p.set_step(step);
  p.set_total_steps(100);
  if (first) p.set_init_checksum("abc");
  return p;
}

class JobTableElasticTest : public JobTableTest {
 protected:
  Decisions Lost(const std::string& worker) {
    Decisions d;
    table_.WorkerLost(worker, "test", &d);
    return d;
  }
  void Report(const std::string& worker, const v1::WorkerMessage::Progress& p) {
    Decisions d;
    table_.HandleProgress(worker, p, &d);
  }
};

TEST_F(JobTableElasticTest, LostRankReFormsFromTheCommittedGenerationAndFencesTheOld) {
  for (const char* w : {"w0", "w1", "w2", "w3"}) Join(w);
  Decisions placed;
  const std::string id = Submit(Elastic(v1::STRATEGY_PS, 3, 2), &placed);
  std::vector<v1::Assignment> a = Assignments(placed);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].job_id(), id);  // generation 0: the job's own id
  EXPECT_TRUE(a[0].checkpoint_at_start());
  EXPECT_EQ(a[0].global_batch(), 3 * 32);
  EXPECT_TRUE(a[0].resume_job_id().empty());
  Report("w0", Progress(id, 0, 0, true));
  Report("w0", Progress(id, 0, 27, false));
  ASSERT_EQ(Job(id).generations_size(), 1);
  EXPECT_TRUE(Job(id).generations(0).committed());

  // w1 (rank 1) is lost: survivors cancelled, slices of generation 0 ended,
  // and the job waits for them (1 idle worker < 3 wanted).
  Decisions lost = Lost("w1");
  std::string cancelled_id;
  EXPECT_EQ(Cancels(lost, &cancelled_id), (std::vector<std::string>{"w0", "w2"}));
  EXPECT_EQ(cancelled_id, id);
  ASSERT_EQ(lost.shard_end_jobs.size(), 1u);
  EXPECT_EQ(lost.shard_end_jobs[0].job_id, id);
  EXPECT_EQ(lost.shard_end_jobs[0].world, 3);
  EXPECT_TRUE(Assignments(lost).empty());
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_EQ(Job(id).generation(), 1);
  EXPECT_TRUE(absl::StrContains(Job(id).waiting_for(), "waiting for 2 rank(s)"))
      << Job(id).waiting_for();
  EXPECT_EQ(Job(id).generations(0).lost_worker(), "w1");
  EXPECT_EQ(Job(id).generations(0).lost_rank(), 1);
  EXPECT_EQ(Job(id).generations(0).end_step(), 27);

  // Fenced: a report of generation 0 changes nothing.
  Report("w0", Progress(id, 0, 35, false));
  EXPECT_EQ(Job(id).step(), 27);

  // The survivors stop; with 3 idle workers generation 1 is placed.
  // Cancelled, they say how far they got (rank 0's last report lagged).
  v1::WorkerMessage::JobDone stopped0 = Done(id, 0, absl::CancelledError("x"));
  stopped0.set_steps(31);
  v1::WorkerMessage::JobDone stopped2 = Done(id, 2, absl::CancelledError("x"));
  stopped2.set_steps(30);
  EXPECT_TRUE(Assignments(JobDone("w0", stopped0)).empty());
  // The last survivor's JobDone places generation 1.
  EXPECT_EQ(Assignments(JobDone("w2", stopped2)).size(), 3u);
  EXPECT_EQ(Job(id).generations(0).end_step(), 31);
  ASSERT_EQ(Job(id).workers_size(), 3);
  const std::string g1 = GenerationJobId(id, 1);
  for (const std::string& w : WorkersOf(id)) {
    EXPECT_NE(w, "w1");
    EXPECT_EQ(BusyWith(w), g1);
  }
  ASSERT_EQ(Job(id).generations_size(), 2);
  EXPECT_EQ(Job(id).generations(1).workers_size(), 3);
  // Rank 0 of generation 1 reports from its checkpoint at step 20.
  Report(Job(id).workers(0), Progress(g1, 0, 20, true));
  EXPECT_TRUE(Job(id).generations(1).committed());
  EXPECT_EQ(Job(id).generations(1).start_step(), 20);
  EXPECT_EQ(Job(id).generations(1).steps_redone(), 11);
  EXPECT_EQ(Job(id).step(), 20);
  // Every rank succeeds: the job does, with the job's global batch.
  for (int r = 0; r < 3; ++r) JobDone(Job(id).workers(r), Done(g1, r));
  EXPECT_EQ(Job(id).state(), v1::SUCCEEDED) << Job(id).error();
  EXPECT_EQ(Job(id).result().global_batch(), 3 * 32);
}

TEST_F(JobTableElasticTest, ATracedJobsTimelineShowsEveryGeneration) {
  for (const char* w : {"w0", "w1", "w2"}) Join(w);
  v1::JobSpec spec = Elastic(v1::STRATEGY_ALLREDUCE, 3, 2);
  spec.set_trace(true);
  const std::string id = Submit(spec);
  Report("w0", Progress(id, 0, 0, true));
  env_.Advance(absl::Seconds(2));
  Lost("w2");
  JobDone("w0", Done(id, 0, absl::CancelledError("x")));
  env_.Advance(absl::Milliseconds(30));
  JobDone("w1", Done(id, 1, absl::CancelledError("x")));
  const std::string g1 = GenerationJobId(id, 1);
  env_.Advance(absl::Milliseconds(20));
  Report("w0", Progress(g1, 0, 0, true));
  env_.Advance(absl::Seconds(1));
  for (int r = 0; r < 2; ++r) JobDone(WorkersOf(id)[r], Done(g1, r));
  ASSERT_EQ(Job(id).state(), v1::SUCCEEDED) << Job(id).error();
  const v1::JobResult& res = Job(id).result();
  ASSERT_EQ(res.traces_size(), 3);  // 2 ranks of generation 1 + the coordinator
  const v1::WorkerTrace& lane = res.traces(2);
  EXPECT_EQ(lane.rank(), -1);
  std::vector<std::string> names;
  for (const v1::TraceEvent& ev : lane.events()) names.push_back(ev.name());
  ASSERT_EQ(names.size(), 4u) << absl::StrJoin(names, " | ");
  EXPECT_TRUE(absl::StartsWith(names[0], "generation 0: 3 ranks"));
  EXPECT_EQ(lane.events(0).dur_us(), 2000000);
  EXPECT_TRUE(absl::StartsWith(names[1], "generation 0 ended: worker w2"));
  EXPECT_EQ(lane.events(1).dur_us(), -1);
  EXPECT_TRUE(absl::StartsWith(names[2], "re-formation"));
  EXPECT_EQ(lane.events(2).thread(), Generations::kReformationsThread);
  EXPECT_EQ(lane.events(2).dur_us(), 50000);
  EXPECT_TRUE(absl::StartsWith(names[3], "generation 1: 2 ranks"));
  EXPECT_EQ(lane.events(3).dur_us(), 1020000);  // placed 20 ms before its report
}

TEST_F(JobTableElasticTest, NextGenerationResumesFromTheCommittedGenerationsCheckpoint) {
  for (const char* w : {"w0", "w1", "w2"}) Join(w);
  Decisions placed;
  const std::string id = Submit(Elastic(v1::STRATEGY_ALLREDUCE, 3, 1), &placed);
  Report("w0", Progress(id, 0, 0, true));
  Lost("w2");
  JobDone("w0", Done(id, 0, absl::CancelledError("x")));
  Decisions second = JobDone("w1", Done(id, 1, absl::CancelledError("x")));
  std::vector<v1::Assignment> a = Assignments(second);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].job_id(), GenerationJobId(id, 1));
  EXPECT_EQ(a[0].world_size(), 2);
  EXPECT_EQ(a[0].global_batch(), 3 * 32);  // the job's, over 2 ranks
  EXPECT_EQ(a[0].resume_job_id(), id);     // generation 0 committed
  EXPECT_EQ(a[0].resume_world(), 3);
  EXPECT_FALSE(a[0].resume_secret().empty());
  EXPECT_NE(a[0].job_secret(), a[0].resume_secret());
  // Generation 1 is lost before its rank 0 reported: not committed, so
  // generation 2 still starts from generation 0's checkpoint.
  const std::vector<std::string> g1 = WorkersOf(id);
  Lost(g1[1]);
  Decisions third =
      JobDone(g1[0], Done(GenerationJobId(id, 1), 0, absl::CancelledError("x")));
  a = Assignments(third);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].job_id(), GenerationJobId(id, 2));
  EXPECT_EQ(a[0].resume_job_id(), id);
  EXPECT_EQ(a[0].resume_world(), 3);
}

TEST_F(JobTableElasticTest, TooFewWorkersFailsAfterTheWaitNamingWhy) {
  for (const char* w : {"w0", "w1", "w2"}) Join(w);
  const std::string id = Submit(Elastic(v1::STRATEGY_ALLREDUCE, 3, 3));
  Report("w0", Progress(id, 0, 0, true));
  Lost("w1");
  JobDone("w0", Done(id, 0, absl::CancelledError("x")));
  JobDone("w2", Done(id, 2, absl::CancelledError("x")));
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_TRUE(absl::StrContains(Job(id).waiting_for(), "needs at least 3 of 3 workers"))
      << Job(id).waiting_for();
  env_.Advance(absl::Milliseconds(999));
  Decisions d;
  table_.ExpireSymptoms(&d);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  env_.Advance(absl::Milliseconds(1));
  table_.ExpireSymptoms(&d);
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_TRUE(absl::StrContains(Job(id).error(), "needs at least 3 of 3 workers"))
      << Job(id).error();
  EXPECT_TRUE(absl::StrContains(Job(id).error(), "w1")) << Job(id).error();
  EXPECT_EQ(Job(id).error_code(), static_cast<int>(absl::StatusCode::kUnavailable));
  // The idle workers take the next job.
  const std::string next = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
  EXPECT_EQ(Job(next).state(), v1::RUNNING);
}

TEST_F(JobTableElasticTest, CancelDuringReFormationEndsItAndFreesTheWorkers) {
  for (const char* w : {"w0", "w1", "w2"}) Join(w);
  const std::string id = Submit(Elastic(v1::STRATEGY_PS, 3, 2));
  Lost("w2");
  Decisions d;
  ASSERT_TRUE(table_.Cancel(id, &d).ok());
  EXPECT_EQ(Job(id).state(), v1::CANCELLED);
  EXPECT_TRUE(d.shard_end_jobs.empty()) << "generation 0 was ended on its shards already";
  JobDone("w0", Done(id, 0, absl::CancelledError("x")));
  Decisions last = JobDone("w1", Done(id, 1, absl::CancelledError("x")));
  EXPECT_TRUE(Assignments(last).empty());
  EXPECT_EQ(BusyWith("w0"), "");
  EXPECT_EQ(BusyWith("w1"), "");
  EXPECT_EQ(Job(id).state(), v1::CANCELLED);
}

TEST_F(JobTableElasticTest, SurvivorsThatDoNotStopAreLeftBehindAfterTheWait) {
  for (const char* w : {"w0", "w1", "w2"}) Join(w);
  v1::JobSpec spec = Elastic(v1::STRATEGY_ALLREDUCE, 3, 1);
  spec.set_elastic_wait_ms(60000);
  const std::string id = Submit(spec);
  Lost("w1");
  JobDone("w0", Done(id, 0, absl::CancelledError("x")));
  EXPECT_EQ(Job(id).workers_size(), 0);  // w2 has not stopped yet
  env_.Advance(kSurvivorWait);
  Decisions d;
  table_.ExpireSymptoms(&d);
  ASSERT_EQ(Job(id).workers_size(), 1);
  EXPECT_EQ(Job(id).workers(0), "w0");
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
}

TEST_F(JobTableElasticTest, ASecondLossDuringTheReFormationIsLeftOut) {
  for (const char* w : {"w0", "w1", "w2", "w3", "w4"}) Join(w);
  const std::string id = Submit(Elastic(v1::STRATEGY_ALLREDUCE, 4, 2));
  Report("w0", Progress(id, 0, 0, true));
  Lost("w1");
  EXPECT_EQ(Job(id).generation(), 1);
  Lost("w2");  // a survivor being cancelled: no second re-formation
  EXPECT_EQ(Job(id).generation(), 1);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  JobDone("w0", Done(id, 0, absl::CancelledError("x")));
  EXPECT_EQ(Job(id).workers_size(), 0);  // w3 still stopping
  JobDone("w3", Done(id, 3, absl::CancelledError("x")));
  // w0, w3 and the spare w4.
  EXPECT_EQ(WorkersOf(id), (std::vector<std::string>{"w0", "w3", "w4"}));
  EXPECT_EQ(Job(id).generation(), 1);
}

TEST_F(JobTableElasticTest, SymptomErrorsReFormInsteadOfFailing) {
  for (const char* w : {"w0", "w1", "w2"}) Join(w);
  const std::string id = Submit(Elastic(v1::STRATEGY_ALLREDUCE, 3, 2));
  JobDone("w1", Done(id, 1, absl::UnavailableError("rank 2 vanished")));
  env_.Advance(kSurvivorWait);  // > kSymptomGrace; nobody reported lost
  Decisions d;
  table_.ExpireSymptoms(&d);
  EXPECT_EQ(Job(id).state(), v1::RUNNING);
  EXPECT_EQ(Job(id).generation(), 1);
  EXPECT_TRUE(
      absl::StrContains(Job(id).generations(0).ended_because(), "rank 2 vanished"));
  // A deterministic error still fails an elastic job.
  const std::string g1 = GenerationJobId(id, 1);
  JobDone("w0", Done(id, 0, absl::CancelledError("x")));
  JobDone("w2", Done(id, 2, absl::CancelledError("x")));
  ASSERT_EQ(Job(id).workers_size(), 3);
  JobDone(Job(id).workers(0), Done(g1, 0, absl::InvalidArgumentError("bad data")));
  EXPECT_EQ(Job(id).state(), v1::FAILED);
}

TEST_F(JobTableElasticTest, GenerationsThatNeverTrainEndTheJob) {
  for (const char* w : {"w0", "w1", "w2", "w3"}) Join(w);
  const std::string id = Submit(Elastic(v1::STRATEGY_PS, 2, 1));
  // Each generation fails at start (e.g. its PS shard is gone) before its
  // rank 0 reports: after kMaxGenerationsWithoutProgress the job fails.
  for (int g = 0; g < kMaxGenerationsWithoutProgress; ++g) {
    ASSERT_EQ(Job(id).state(), v1::RUNNING) << g;
    ASSERT_EQ(Job(id).workers_size(), 2) << g;
    const std::string gid = GenerationJobId(id, g);
    const std::vector<std::string> ranks = WorkersOf(id);
    JobDone(ranks[0], Done(gid, 0, absl::UnavailableError("PS shard ps0:1 unreachable")));
    JobDone(ranks[1], Done(gid, 1, absl::UnavailableError("PS shard ps0:1 unreachable")));
  }
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_TRUE(absl::StrContains(Job(id).error(), "3 generations in a row"))
      << Job(id).error();
  EXPECT_TRUE(absl::StrContains(Job(id).error(), "PS shard ps0:1")) << Job(id).error();
}

// Issue 51: a member no peer can reach lets every generation commit its
// start and fail its first step; such generations are no progress either,
// so the job fails after kMaxGenerationsWithoutProgress of them instead of
// re-forming 60 times. One that trains a step resets the count.
TEST_F(JobTableElasticTest, GenerationsThatCommitButTrainNoStepEndTheJob) {
  for (const char* w : {"w0", "w1", "w2"}) Join(w);
  const std::string id = Submit(Elastic(v1::STRATEGY_ALLREDUCE, 2, 1));
  int64_t step = 0;
  // A rank's JobDone says how far it got: where its generation started.
  auto done = [&](const std::string& job, int rank, const absl::Status& st) {
    v1::WorkerMessage::JobDone d = Done(job, rank, st);
    d.set_steps(step);
    return d;
  };
  auto fail_at_start = [&](int g) {
    const std::string gid = GenerationJobId(id, g);
    const std::vector<std::string> ranks = WorkersOf(id);
    Report(ranks[0], Progress(gid, 0, step, /*first=*/true));  // committed
    JobDone(ranks[1], done(gid, 1, absl::UnavailableError("rank 0 (bad:1) unreachable")));
    env_.Advance(kSymptomGrace);
    Decisions d;
    table_.ExpireSymptoms(&d);
    JobDone(ranks[0], done(gid, 0, absl::CancelledError("x")));
  };
  // Generation 0 trains 20 steps, then two generations train none.
  Report(WorkersOf(id)[0], Progress(id, 0, 0, true));
  step = 20;
  Report(WorkersOf(id)[0], Progress(id, 0, step, false));
  JobDone(WorkersOf(id)[1],
          Done(id, 1, absl::UnavailableError("rank 0 (bad:1) unreachable")));
  env_.Advance(kSymptomGrace);
  Decisions d;
  table_.ExpireSymptoms(&d);
  JobDone("w0", done(id, 0, absl::CancelledError("x")));
  for (int g = 1; g < kMaxGenerationsWithoutProgress; ++g) {
    ASSERT_EQ(Job(id).state(), v1::RUNNING) << g;
    ASSERT_EQ(Job(id).generation(), g);
    ASSERT_EQ(Job(id).workers_size(), 2) << g;
    fail_at_start(g);
  }
  ASSERT_EQ(Job(id).state(), v1::RUNNING) << "two without progress: one more is allowed";
  fail_at_start(kMaxGenerationsWithoutProgress);
  EXPECT_EQ(Job(id).state(), v1::FAILED);
  EXPECT_TRUE(absl::StrContains(Job(id).error(),
                                "3 generations in a row ended without "
                                "training a step"))
      << Job(id).error();
  EXPECT_TRUE(absl::StrContains(Job(id).error(), "bad:1")) << Job(id).error();
}

TEST_F(JobTableElasticTest, IdleWorkersAreTakenInAtTheNextCommit) {
  for (const char* w : {"w0", "w1"}) Join(w);
  v1::JobSpec spec = Elastic(v1::STRATEGY_ALLREDUCE, 3, 2);
  spec.set_workers(3);
  // Only 2 workers: an elastic job still waits for `workers` to start.
  const std::string id = Submit(spec);
  EXPECT_EQ(Job(id).state(), v1::QUEUED);
  Join("w2");
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  Lost("w2");
  JobDone("w0", Done(id, 0, absl::CancelledError("x")));
  JobDone("w1", Done(id, 1, absl::CancelledError("x")));
  ASSERT_EQ(Job(id).workers_size(), 2);
  const std::string g1 = GenerationJobId(id, 1);
  Report(Job(id).workers(0), Progress(g1, 0, 10, true));
  Join("w3");  // comes back as a new worker
  Report(Job(id).workers(0), Progress(g1, 0, 15, false));
  EXPECT_EQ(Job(id).generation(), 1) << "not at a commit boundary yet";
  Report(Job(id).workers(0), Progress(g1, 0, 21, false));
  EXPECT_EQ(Job(id).generation(), 2);
  EXPECT_TRUE(absl::StrContains(Job(id).generations(1).ended_because(), "scaling up"));
  JobDone("w0", Done(g1, 0, absl::CancelledError("x")));
  JobDone("w1", Done(g1, 1, absl::CancelledError("x")));
  EXPECT_EQ(Job(id).workers_size(), 3);
}

// Issue 51, finding 7: a member its peers cannot reach (a spare with a bad
// --advertise) was taken back every generation. The generation it fails
// blames it (its peer's error names it), and the next generation is placed
// without it while that registration of it lasts and others suffice.
TEST_F(JobTableElasticTest, AMemberItsPeersCannotReachIsLeftOutOfTheNextGeneration) {
  for (const char* w : {"w0", "w1", "w2", "w3"}) Join(w);
  const std::string id = Submit(Elastic(v1::STRATEGY_ALLREDUCE, 3, 2));
  const std::vector<std::string> ranks = WorkersOf(id);
  ASSERT_EQ(ranks.size(), 3u);
  const std::string bad = ranks[0];
  Report(ranks[0], Progress(id, 0, 0, true));
  // Rank 1 cannot reach rank 0; the symptom's grace passes; all stop.
  JobDone(
      ranks[1],
      Done(id, 1,
           absl::UnavailableError("rank 1 cannot reach rank 0: connect failed (bad:1)")));
  env_.Advance(kSymptomGrace);
  Decisions d;
  table_.ExpireSymptoms(&d);
  JobDone(ranks[0], Done(id, 0, absl::CancelledError("x")));
  JobDone(ranks[2], Done(id, 2, absl::CancelledError("x")));
  ASSERT_EQ(Job(id).state(), v1::RUNNING);
  ASSERT_EQ(Job(id).generation(), 1);
  EXPECT_EQ(Job(id).generations(0).lost_worker(), bad);
  EXPECT_EQ(Job(id).generations(0).lost_rank(), 0);
  const std::vector<std::string> next = WorkersOf(id);
  EXPECT_EQ(next.size(), 3u) << "the spare takes its place";
  EXPECT_EQ(std::count(next.begin(), next.end(), bad), 0) << bad << " was taken back";
}

}  // namespace
}  // namespace gradsync
