// The coordinator's job table, in process: results (means over ranks,
// checksum comparisons), the event log that WatchJob streams, bench jobs,
// stall reports and traces. No processes, sockets or sleeps.
#include "server/coordinator/job_table.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "server/coordinator/worker_registry.h"
#include "tests/server/job_table_test_util.h"

namespace gradsync {
namespace {

// ------------------------------------------------------------- results

TEST_F(JobTableTest, FinalizeAveragesOverRanks) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
  env_.Advance(absl::Seconds(10));
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
  d0.add_bucket_algorithms("rd");
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
  EXPECT_DOUBLE_EQ(r.test_accuracy(), 0.85);             // rank 0's
  EXPECT_DOUBLE_EQ(r.samples_per_second(), 2000.0 / 5);  // slowest rank's wall
  EXPECT_DOUBLE_EQ(r.wall_seconds(), 10);                // from the injected clock
  EXPECT_EQ(r.steps(), 100);
  EXPECT_EQ(job.step(), 100);
  EXPECT_EQ(r.global_batch(), 64);
  EXPECT_EQ(r.ps_shards(), 0);
  EXPECT_EQ(r.device(), "cpu");
  ASSERT_EQ(r.bucket_bytes_size(), 2);  // rank 0's layout
  EXPECT_EQ(r.bucket_bytes(0), 544);
  EXPECT_EQ(r.bucket_bytes(1), 3216);
  ASSERT_EQ(r.bucket_algorithms_size(), 2);  // rank 0's, bucket order
  EXPECT_EQ(r.bucket_algorithms(0), "rd");
  EXPECT_EQ(r.bucket_algorithms(1), "ring");
  EXPECT_EQ(r.param_checksums_size(), 2);
  EXPECT_EQ(r.comm_seconds_per_worker_size(), 2);
  EXPECT_TRUE(d.sends.empty());           // every rank is done: nothing to cancel
  EXPECT_TRUE(d.shard_end_jobs.empty());  // ring
}

// A TorchScript model's size is known only to the workers: the assignment
// carries none, and the result counts it from rank 0's buckets.
TEST_F(JobTableTest, ATorchScriptJobsSizeComesFromItsBuckets) {
  Join("w0");
  v1::JobSpec spec = Spec(v1::STRATEGY_ALLREDUCE, 1);
  spec.set_model("torchscript:sha256:" + std::string(64, 'c'));
  const std::string id = Submit(spec);
  v1::WorkerMessage::JobDone d0 = Done(id, 0);
  d0.add_bucket_bytes(400);
  d0.add_bucket_bytes(246424);
  JobDone("w0", d0);
  ASSERT_EQ(Job(id).state(), v1::SUCCEEDED) << Job(id).error();
  EXPECT_EQ(Job(id).result().num_params(), (400 + 246424) / 4);
}

TEST_F(JobTableTest, RingReplicasThatDivergeAreDataLoss) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
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
v1::WorkerMessage::JobDone BenchDone(const std::string& job, int rank,
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
  // α, β and the groups are rank 0's, whatever the other ranks say.
  v1::WorkerMessage::JobDone d0 = BenchDone(id, 0, {{1, 5, 3}, {2, 2, 2}});
  v1::BenchLink* between = d0.mutable_bench()->mutable_between_hosts();
  between->set_rank_a(0);
  between->set_rank_b(1);
  between->set_alpha_seconds(1e-5);
  between->set_beta_bytes_per_second(1e9);
  d0.mutable_bench()->add_host_groups(0);
  d0.mutable_bench()->add_host_groups(1);
  JobDone("w0", d0);
  // Rank 1 measured the second pair's link; its between_hosts loses to
  // rank 0's.
  v1::WorkerMessage::JobDone d1 = BenchDone(id, 1, {{2, 1, 9}, {1, 4, 1}});
  d1.mutable_bench()->set_alpha_seconds(7e-5);
  d1.mutable_bench()->mutable_between_hosts()->set_alpha_seconds(9e-5);
  v1::BenchLink* inside = d1.mutable_bench()->mutable_inside_host();
  inside->set_rank_a(1);
  inside->set_rank_b(2);
  inside->set_alpha_seconds(9e-6);
  d1.mutable_bench()->add_host_groups(5);
  d1.mutable_bench()->mutable_rows(1)->set_ok(false);
  d1.mutable_bench()->mutable_rows(1)->set_error("element 7: got 1, want 3");
  Decisions d = JobDone("w1", d1);
  const v1::Job& job = Job(id);
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << job.error();
  const v1::BenchResult& b = job.result().bench();
  EXPECT_DOUBLE_EQ(b.alpha_seconds(), 1e-5);
  EXPECT_DOUBLE_EQ(b.beta_bytes_per_second(), 1e9);
  ASSERT_TRUE(b.has_between_hosts());
  EXPECT_EQ(b.between_hosts().rank_b(), 1);
  EXPECT_DOUBLE_EQ(b.between_hosts().alpha_seconds(), 1e-5);
  EXPECT_DOUBLE_EQ(b.between_hosts().beta_bytes_per_second(), 1e9);
  ASSERT_TRUE(b.has_inside_host());
  EXPECT_EQ(b.inside_host().rank_a(), 1);
  EXPECT_DOUBLE_EQ(b.inside_host().alpha_seconds(), 9e-6);
  EXPECT_EQ(std::vector<int>(b.host_groups().begin(), b.host_groups().end()),
            (std::vector<int>{0, 1}));
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
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2), &d);
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
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  Decisions d;
  table_.WorkerLost("w0", "gone", &d);
  WatchCursor cursor;
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(Read(id, &cursor, &events));
  const v1::JobEvent& last = events.back();
  EXPECT_EQ(last.state(), v1::FAILED);
  EXPECT_EQ(last.message(), "worker w0 (rank 0, w0:7000) lost: gone");
  EXPECT_EQ(last.job().error_code(), static_cast<int>(absl::StatusCode::kUnavailable));
}

// ---------------------------------------------------------------- stalls

TEST_F(JobTableTest, StallReportsBecomeEventsAndOneStatusLinePerRank) {
  Join("w0");
  Join("w1");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 2));
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
  auto stalls = [&] { return Ids(Job(id).stalls().begin(), Job(id).stalls().end()); };
  EXPECT_EQ(stalls(), (Ids{line}));
  ASSERT_FALSE(Read(id, &cursor, &events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind(), v1::JobEvent::STALL);
  EXPECT_EQ(events[0].message(), line);
  // The end of the wait replaces the rank's line.
  s.set_resolved(true);
  s.set_waited_ms(16000);
  table_.HandleStall("w1", s, &d);
  EXPECT_EQ(stalls(), (Ids{"rank 1 waited 16.0 s for rank 0 (w0:7000) at step 42 bucket "
                           "0 reduce-scatter (resolved)"}));
  // After the job ended its status keeps the last report.
  JobDone("w0", Done(id, 0, absl::InternalError("broken")));
  ASSERT_EQ(Job(id).state(), v1::FAILED);
  s.set_resolved(false);
  table_.HandleStall("w1", s, &d);
  EXPECT_EQ(Job(id).stalls_size(), 1);
  EXPECT_NE(Job(id).stalls(0).find("(resolved)"), std::string::npos);
}

// spec.trace: each rank's timeline moves into the result (worker ids set),
// only for the newest kMaxTracedJobs jobs, and never for a failed job.
TEST_F(JobTableTest, TracesAreKeptForTheNewestSucceededJobsOnly) {
  Join("w0");
  Join("w1");
  v1::JobSpec spec = Spec(v1::STRATEGY_ALLREDUCE, 2);
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

// ------------------------------------------------------------- stragglers

// Rank r of job `id` (on worker "w<r>") reports every 10 steps, from step 0
// to 10 x `reports`, having computed seconds_per_step[r] a step.
class StragglerTableTest : public JobTableTest {
 protected:
  void ReportCompute(const std::string& id, const std::vector<double>& seconds_per_step,
                     int reports) {
    Decisions d;
    for (int report = 0; report <= reports; ++report) {
      for (int r = 0; r < static_cast<int>(seconds_per_step.size()); ++r) {
        v1::WorkerMessage::Progress p;
        p.set_job_id(id);
        p.set_rank(r);
        p.set_step(10 * report);
        p.set_total_steps(100);
        p.set_compute_seconds(seconds_per_step[r] * 10 * report);
        table_.HandleProgress(absl::StrCat("w", r), p, &d);
      }
    }
  }
  // Every rank ends its 100 steps having computed compute_seconds[r].
  void FinishWithCompute(const std::string& id,
                         const std::vector<double>& compute_seconds) {
    for (int r = 0; r < static_cast<int>(compute_seconds.size()); ++r) {
      v1::WorkerMessage::JobDone done = Done(id, r);
      done.set_compute_seconds(compute_seconds[r]);
      JobDone(absl::StrCat("w", r), done);
    }
  }
};

TEST_F(StragglerTableTest, ASlowRankIsNamedInTheEventsAndTheResult) {
  Join("w0");
  Join("w1");
  Join("w2");
  const std::string id = Submit(Spec(v1::STRATEGY_ALLREDUCE, 3));
  WatchCursor cursor;
  std::vector<v1::JobEvent> events;
  Read(id, &cursor, &events);
  // Three more reports of 10 steps each after the first: w1 computes 3x.
  ReportCompute(id, {0.01, 0.03, 0.01}, 3);
  ASSERT_FALSE(Read(id, &cursor, &events));
  std::vector<std::string> named;
  for (const v1::JobEvent& ev : events) {
    if (ev.kind() == v1::JobEvent::STRAGGLER) named.push_back(ev.message());
  }
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0],
            "straggler: rank 1 computes 3.0x the other ranks' median per step "
            "(30.0 ms against 10.0 ms, 3 reports in a row), worker w1");
  // The result: compute per rank, and the whole run's slowest rank.
  FinishWithCompute(id, {1.0, 3.0, 1.2});  // 100 steps each
  const v1::Job job = Job(id);
  ASSERT_EQ(job.state(), v1::SUCCEEDED);
  const v1::JobResult& res = job.result();
  ASSERT_EQ(res.compute_seconds_per_rank_size(), 3);
  EXPECT_DOUBLE_EQ(res.compute_seconds_per_rank(1), 3.0);
  ASSERT_TRUE(res.has_slowest_rank());
  EXPECT_EQ(res.slowest_rank().rank(), 1);
  EXPECT_EQ(res.slowest_rank().worker_id(), "w1");
  EXPECT_NEAR(res.slowest_rank().seconds_per_step(), 0.030, 1e-12);
  EXPECT_NEAR(res.slowest_rank().others_median(), 0.011, 1e-12);  // of 10 and 12 ms
  EXPECT_NEAR(res.slowest_rank().ratio(), 0.030 / 0.011, 1e-9);
  EXPECT_TRUE(res.slowest_rank().named());
}

TEST_F(StragglerTableTest, EvenRanksNameNoStragglerAndOneRankHasNoSlowest) {
  Join("w0");
  Join("w1");
  const std::string even = Submit(Spec(v1::STRATEGY_PS, 2));
  ReportCompute(even, {0.010, 0.012}, 5);
  FinishWithCompute(even, {1.0, 1.2});
  WatchCursor cursor;
  std::vector<v1::JobEvent> events;
  Read(even, &cursor, &events);
  for (const v1::JobEvent& ev : events) EXPECT_NE(ev.kind(), v1::JobEvent::STRAGGLER);
  ASSERT_TRUE(Job(even).result().has_slowest_rank());
  EXPECT_EQ(Job(even).result().slowest_rank().rank(), 1);
  EXPECT_FALSE(Job(even).result().slowest_rank().named());

  const std::string alone = Submit(Spec(v1::STRATEGY_ALLREDUCE, 1));
  const std::string worker = Job(alone).workers(0);
  v1::WorkerMessage::JobDone done = Done(alone, 0);
  done.set_compute_seconds(1);
  JobDone(worker, done);
  ASSERT_EQ(Job(alone).state(), v1::SUCCEEDED);
  EXPECT_FALSE(Job(alone).result().has_slowest_rank());
  EXPECT_EQ(Job(alone).result().compute_seconds_per_rank_size(), 1);
}

}  // namespace
}  // namespace gradsync
