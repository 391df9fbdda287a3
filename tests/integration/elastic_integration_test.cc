// Elastic jobs on real daemons (issue 36): a worker killed (kill -9) or
// frozen (SIGSTOP) mid-job ends a generation; the job re-forms on the
// survivors (and spares, and workers that come back) from its newest
// checkpoint and SUCCEEDS, close to an uninterrupted run of the same seed.
#include <cmath>
#include <functional>
#include <iostream>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/integration/checkpoint_util.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

constexpr int kCommitEvery = 20;

// `epochs` over the first `samples` training samples (global batch 4 x 32),
// committing every kCommitEvery steps.
v1::JobSpec ElasticSpec(const std::string& strategy, const std::string& mode,
                        int min_workers, int epochs = 4, int64_t samples = 12800) {
  v1::JobSpec s = Spec(strategy, mode, 4);
  s.set_elastic(true);
  s.set_min_workers(min_workers);
  s.set_checkpoint_every(kCommitEvery);
  s.set_train_limit(samples);
  s.set_epochs(epochs);
  s.set_seed(7);
  if (mode == "async" && strategy == "ps") s.set_staleness(2);
  return s;
}

// Submits `spec`, waits until rank 0 passed `step`, then calls `act`.
v1::Job RunAndAct(Cluster& c, const v1::JobSpec& spec, int64_t step,
                  const std::function<void()>& act) {
  v1::Job job;
  EXPECT_TRUE(c.Submit(spec, &job).ok());
  v1::Job running = c.WaitFor(job.id(), absl::Seconds(60), [&](const v1::Job& j) {
    return Terminal(j) || (j.state() == v1::RUNNING && j.step() >= step);
  });
  EXPECT_EQ(running.state(), v1::RUNNING) << running.error();
  act();
  return c.WaitFor(job.id(), absl::Seconds(240), Terminal);
}

std::string History(const v1::Job& j) {
  std::string out;
  for (const v1::JobGeneration& g : j.generations()) {
    absl::StrAppend(&out, "\n  gen ", g.generation(), ": ", g.workers_size(),
                    " ranks, steps ", g.start_step(), "..", g.end_step(), ", reform ",
                    g.reform_seconds(), " s, redone ", g.steps_redone(),
                    ", ended: ", g.ended_because());
  }
  return out;
}

class ElasticModes
    : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

// kill -9 one worker at a random step: SUCCEEDED on 3 ranks, at most K
// steps redone, the history names the lost worker, and the model still
// learns. One short job (200 steps): how close its accuracy ends to an
// uninterrupted run's, over epochs and with a loss in every epoch, is
// bench/elastic_bench's churn measurement (docs/performance.md), which
// needs jobs too long for the suite.
TEST_P(ElasticModes, KillNineMidJobSucceedsRedoingAtMostKSteps) {
  const auto& [strategy, mode] = GetParam();
  Cluster c(4);
  ASSERT_TRUE(c.ok());
  const v1::JobSpec spec = ElasticSpec(strategy, mode, 2, 1, 25600);

  std::mt19937 rng(std::random_device{}());
  const int64_t at = std::uniform_int_distribution<int64_t>(15, 120)(rng);
  const int victim = std::uniform_int_distribution<int>(0, 3)(rng);
  absl::Time killed;
  const v1::Job cut = RunAndAct(c, spec, at, [&] {
    c->KillWorker(victim);
    killed = absl::Now();
  });
  std::cout << strategy << "-" << mode << ": killed w" << victim << " at step >= " << at
            << "; accuracy " << cut.result().test_accuracy() << ", wall "
            << cut.result().wall_seconds() << " s" << History(cut) << "\n";
  ASSERT_EQ(cut.state(), v1::SUCCEEDED) << cut.error() << History(cut);
  ASSERT_GE(cut.generations_size(), 2) << History(cut);
  const v1::JobGeneration& lost = cut.generations(0);
  EXPECT_EQ(lost.lost_worker(), absl::StrCat("w", victim));
  EXPECT_NE(lost.ended_because().find(absl::StrCat("w", victim)), std::string::npos);
  const v1::JobGeneration& next = cut.generations(1);
  EXPECT_EQ(next.workers_size(), 3);
  EXPECT_TRUE(next.committed());
  // At most K steps redone (the commit before the loss), plus the steps a
  // rank may run ahead (ps async: staleness 2; ring async: depth 1), plus K
  // when the lost rank was allreduce rank 0, whose commit in flight is cut
  // off (the one before it is used).
  int64_t limit = kCommitEvery + (mode == "async" ? (strategy == "ps" ? 2 : 1) : 0);
  if (strategy == "ring" && lost.lost_rank() == 0) limit += kCommitEvery;
  EXPECT_LE(next.steps_redone(), limit) << History(cut);
  EXPECT_EQ(cut.workers_size(), 3);
  // It learned (chance is 0.1; 200 uninterrupted steps reach about 0.75).
  EXPECT_GT(cut.result().test_accuracy(), 0.6);
  if (mode == "sync" || strategy == "ring") {
    // Every rank of the last generation ended with the same parameters.
    for (const std::string& sum : cut.result().param_checksums()) {
      EXPECT_EQ(sum, cut.result().param_checksums(0));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, ElasticModes,
    ::testing::Values(std::make_pair("ps", "sync"), std::make_pair("ps", "async"),
                      std::make_pair("ring", "sync"), std::make_pair("ring", "async")),
    [](const auto& info) { return info.param.first + "_" + info.param.second; });

// With a spare idle worker the job keeps 4 ranks; a worker that comes back
// is taken in again at a commit boundary (scale up).
TEST(Elastic, SpareKeepsWorldAndReturningWorkerIsTakenBackIn) {
  Cluster c(5);
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec = ElasticSpec("ring", "sync", 2);
  spec.set_epochs(5);  // 250 steps; the scale-up comes at about step 140
  // Spare: 5 workers, the job takes 4; kill one of them.
  v1::Job job;
  ASSERT_TRUE(c.Submit(spec, &job).ok());
  v1::Job running = c.WaitFor(job.id(), absl::Seconds(60), [](const v1::Job& j) {
    return Terminal(j) || (j.state() == v1::RUNNING && j.step() >= 30);
  });
  ASSERT_EQ(running.state(), v1::RUNNING) << running.error();
  const std::string victim = running.workers(1);
  const int victim_index = std::stoi(victim.substr(1));
  c->KillWorker(victim_index);
  v1::Job second = c.WaitFor(job.id(), absl::Seconds(30), [](const v1::Job& j) {
    return Terminal(j) || (j.generation() == 1 && j.workers_size() > 0);
  });
  ASSERT_EQ(second.state(), v1::RUNNING) << second.error() << History(second);
  EXPECT_EQ(second.workers_size(), 4) << History(second);
  // Lose another: now 3 ranks, no spare.
  const std::string victim2 = second.workers(2);
  c->KillWorker(std::stoi(victim2.substr(1)));
  v1::Job third = c.WaitFor(job.id(), absl::Seconds(30), [](const v1::Job& j) {
    return Terminal(j) || (j.generation() == 2 && j.workers_size() > 0);
  });
  ASSERT_EQ(third.state(), v1::RUNNING) << third.error() << History(third);
  // The 3 live workers, or 2 when one of them took longer than
  // kSurvivorWait to stop its cancelled generation (seen under ctest -j3
  // with two busy processes beside it: the re-formation took 5.4 s and
  // placed the two that were idle); either way the returning worker and
  // the late one are taken in at the next commit (checked below).
  EXPECT_GE(third.workers_size(), 2) << History(third);
  EXPECT_LE(third.workers_size(), 3) << History(third);
  // The first victim comes back: taken in at the next commit.
  const absl::Status back = c->RestartWorker(victim_index);
  ASSERT_TRUE(back.ok()) << back;
  v1::Job done = c.WaitFor(job.id(), absl::Seconds(240), Terminal);
  std::cout << "spare + scale up:" << History(done) << "\n";
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << History(done);
  ASSERT_GE(done.generations_size(), 4) << History(done);
  EXPECT_NE(done.generations(2).ended_because().find("scaling up"), std::string::npos)
      << History(done);
  // Back to 4 ranks: at once, or one scale-up later when the late survivor
  // above became idle after the returning worker.
  const int last = done.generations_size() - 1;
  EXPECT_LE(last, 4) << History(done);
  EXPECT_EQ(done.generations(last).workers_size(), 4) << History(done);
  EXPECT_EQ(done.workers_size(), 4);
  EXPECT_GT(done.result().test_accuracy(), 0.7);
}

// A frozen worker misses its heartbeats: the job re-forms without it and
// finishes; woken, the worker is fenced (its generation is over), goes idle
// and takes the next job.
TEST(Elastic, FrozenWorkerIsFencedAndTakesTheNextJob) {
  Cluster c(4, 1, false, /*heartbeat_timeout=*/2.0);
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec = ElasticSpec("ps", "sync", 2);
  spec.set_trace(true);  // the coordinator's lane shows the generations
  v1::Job job;
  ASSERT_TRUE(c.Submit(spec, &job).ok());
  v1::Job running = c.WaitFor(job.id(), absl::Seconds(60), [](const v1::Job& j) {
    return Terminal(j) || (j.state() == v1::RUNNING && j.step() >= 25);
  });
  ASSERT_EQ(running.state(), v1::RUNNING) << running.error();
  c->StopWorker(3);
  v1::Job reformed = c.WaitFor(job.id(), absl::Seconds(30), [](const v1::Job& j) {
    return Terminal(j) || (j.generation() >= 1 && j.workers_size() > 0);
  });
  ASSERT_EQ(reformed.state(), v1::RUNNING) << reformed.error() << History(reformed);
  for (const std::string& w : reformed.workers()) EXPECT_NE(w, "w3");
  c->ContinueWorker(3);  // wakes up inside a generation that has ended
  v1::Job done = c.WaitFor(job.id(), absl::Seconds(240), Terminal);
  std::cout << "frozen worker:" << History(done) << "\n";
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << History(done);
  EXPECT_NE(done.generations(0).ended_because().find("w3"), std::string::npos)
      << History(done);
  v1::Job traced;
  ASSERT_TRUE(c.Get(job.id(), &traced).ok());
  int lanes = 0, reformations = 0;
  for (const v1::WorkerTrace& t : traced.result().traces()) {
    if (t.rank() != -1) continue;
    ++lanes;
    for (const v1::TraceEvent& ev : t.events()) {
      reformations += ev.name().rfind("re-formation", 0) == 0 ? 1 : 0;
    }
  }
  EXPECT_EQ(lanes, 1);
  EXPECT_EQ(reformations, done.generations_size() - 1);
  // The woken worker rejoins idle and runs the next job with the others.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (c.IdleWorkers() != 4 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(c.IdleWorkers(), 4);
  v1::JobSpec next = Spec("ring", "sync", 4);
  next.set_steps(10);
  const v1::Job after = RunToEnd(c, next);
  EXPECT_EQ(after.state(), v1::SUCCEEDED) << after.error();
}

// Fewer than min_workers left: the job waits elastic_wait_ms, then FAILS
// saying what it waited for; two losses in a row (the second while the job
// re-forms) still end in SUCCEEDED when enough remain.
TEST(Elastic, BelowMinWorkersFailsAfterTheWaitAndTwoLossesInARowSucceed) {
  Cluster c(4);
  ASSERT_TRUE(c.ok());
  v1::JobSpec strict = ElasticSpec("ring", "sync", 4);
  strict.set_elastic_wait_ms(1500);
  const v1::Job failed = RunAndAct(c, strict, 20, [&] { c->KillWorker(3); });
  EXPECT_EQ(failed.state(), v1::FAILED) << History(failed);
  EXPECT_NE(failed.error().find("needs at least 4 of 4 workers"), std::string::npos)
      << failed.error();
  EXPECT_NE(failed.error().find("w3"), std::string::npos) << failed.error();

  const absl::Status back = c->RestartWorker(3);
  ASSERT_TRUE(back.ok()) << back;
  // The second kill follows the first at once: it lands during the
  // re-formation (some 30 ms here) or just after it, as timing has it; the
  // job table test ASecondLossDuringTheReFormationIsLeftOut holds the first
  // case exactly.
  const v1::Job twice = RunAndAct(c, ElasticSpec("ps", "async", 2), 30, [&] {
    c->KillWorker(1);
    c->KillWorker(2);
  });
  std::cout << "two losses:" << History(twice) << "\n";
  ASSERT_EQ(twice.state(), v1::SUCCEEDED) << twice.error() << History(twice);
  EXPECT_EQ(twice.workers_size(), 2) << History(twice);
  EXPECT_GE(twice.generations_size(), 2);
}

// A PS shard that stops answering is not something a new generation can
// fix (no spare shard is configured): the ranks' step timeouts end a few
// generations that never train, and the job FAILS naming the shard.
TEST(Elastic, LostPsShardFailsTheJobNamingIt) {
  Cluster c(2, /*shards=*/2);
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec = ElasticSpec("ps", "sync", 1);
  spec.set_workers(2);
  spec.set_ps_shards(2);
  spec.set_step_timeout_ms(1500);
  const std::string shard = c->shards()[0].address;
  const absl::Time stopped_at = absl::Now();
  const v1::Job failed = RunAndAct(c, spec, 20, [&] { c->StopShard(0); });
  c->ContinueShard(0);
  std::cout << "lost shard: " << failed.error() << " after "
            << absl::FormatDuration(absl::Now() - stopped_at) << History(failed) << "\n";
  EXPECT_EQ(failed.state(), v1::FAILED) << History(failed);
  EXPECT_NE(failed.error().find("generations in a row"), std::string::npos)
      << failed.error();
  EXPECT_NE(failed.error().find(shard), std::string::npos) << failed.error();
}

// The server restarted during an elastic job: the job is FAILED
// "coordinator restarted" (as every running job), and --resume continues it
// from its newest committed generation.
TEST(Elastic, ServerRestartFailsTheJobAndResumeContinuesFromItsGenerations) {
  Cluster c(3);
  ASSERT_TRUE(c.ok());
  v1::JobSpec spec = ElasticSpec("ring", "sync", 2);
  spec.set_workers(3);
  v1::Job job;
  ASSERT_TRUE(c.Submit(spec, &job).ok());
  v1::Job running = c.WaitFor(job.id(), absl::Seconds(60), [](const v1::Job& j) {
    return Terminal(j) || (j.state() == v1::RUNNING && j.step() >= 30);
  });
  ASSERT_EQ(running.state(), v1::RUNNING) << running.error();
  c->KillWorker(0);
  v1::Job reformed = c.WaitFor(job.id(), absl::Seconds(30), [](const v1::Job& j) {
    return Terminal(j) || (j.generation() == 1 && j.step() >= 70);
  });
  ASSERT_EQ(reformed.state(), v1::RUNNING) << History(reformed);
  // RestartServer waits for all 3 workers; w0 comes back first (the job may
  // take it in: another generation).
  const absl::Status back = c->RestartWorker(0);
  ASSERT_TRUE(back.ok()) << back;
  const std::string old_log = c->server().log;
  ASSERT_TRUE(c->RestartServer().ok());
  v1::Job after;
  ASSERT_TRUE(c.Get(job.id(), &after).ok());
  // On a failure, what both coordinators logged says how the job got there.
  EXPECT_EQ(after.state(), v1::FAILED)
      << v1::JobState_Name(after.state()) << " " << after.error() << History(after)
      << "\nthe killed server's log:\n"
      << Slurp(old_log) << "\nthe restarted server's log:\n"
      << Slurp(c->server().log);
  EXPECT_NE(after.error().find("coordinator restarted"), std::string::npos);
  v1::JobSpec again = spec;
  again.set_resume_from(job.id());
  const v1::Job resumed = RunToEnd(c, again);
  ASSERT_EQ(resumed.state(), v1::SUCCEEDED) << resumed.error() << History(resumed);
  // It started from generation 1's checkpoint, not from step 0.
  ASSERT_GE(resumed.generations_size(), 1);
  EXPECT_GE(resumed.generations(0).start_step(), 60) << History(resumed);
}

}  // namespace
}  // namespace gradsync
