// Generations on its own: data-plane ids, and the records of an elastic
// job's generations (start, end, commit, steps redone, a fenced rank's late
// JobDone, the coordinator's timeline lane).
#include "server/coordinator/generations.h"

#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace gradsync {
namespace {

TEST(GenerationJobIdTest, RoundTripsAndLeavesOtherIdsAlone) {
  EXPECT_EQ(GenerationJobId("j-1", 0), "j-1");
  EXPECT_EQ(GenerationJobId("j-1", 3), "j-1.g3");
  EXPECT_EQ(SplitGenerationJobId("j-1.g3"), std::make_pair(std::string("j-1"), 3));
  EXPECT_EQ(SplitGenerationJobId("j-1"), std::make_pair(std::string("j-1"), 0));
  for (const char* plain : {"j-1.g0", "j-1.gx", "j-1.g", ".g2", "j-1.g02", "j-1.g-2"}) {
    EXPECT_EQ(SplitGenerationJobId(plain), std::make_pair(std::string(plain), 0))
        << plain;
  }
}

// Generation g of `job` placed on `workers` workers at `ms`.
void Place(v1::Job* job, int g, int workers, int64_t ms) {
  job->set_generation(g);
  job->clear_workers();
  for (int r = 0; r < workers; ++r) job->add_workers("w" + std::to_string(g * 10 + r));
  Generations(job).Start(ms);
}

TEST(GenerationsTest, RecordsEachGenerationAndTheStepsTheNextOneRedid) {
  v1::Job job;
  job.set_id("j-1");
  Generations gens(&job);
  EXPECT_EQ(Generations::Committed(job), -1);

  Place(&job, 0, 3, 1000);
  EXPECT_EQ(Generations::World(job, 0), 3);
  EXPECT_EQ(gens.Commit(0, 0), "generation 0 training from step 0 on 3 workers");
  EXPECT_EQ(gens.Commit(0, 0), "");  // once
  EXPECT_EQ(Generations::Committed(job), 0);
  job.set_step(120);  // rank 0 reported step 120 last
  gens.End("worker w1 lost", "w1", 1, 5000);
  const v1::JobGeneration& g0 = job.generations(0);
  EXPECT_EQ(g0.end_step(), 120);
  EXPECT_EQ(g0.ended_because(), "worker w1 lost");
  EXPECT_EQ(g0.lost_worker(), "w1");
  EXPECT_EQ(g0.lost_rank(), 1);
  EXPECT_EQ(g0.end_time_ms(), 5000);

  // Generation 1 never commits: it ends at its start step, trains nothing.
  Place(&job, 1, 2, 5100);
  EXPECT_EQ(gens.WithoutProgressInARow(), 1);
  gens.End("shard gone", "", -1, 5200);
  EXPECT_EQ(job.generations(1).end_step(), job.generations(1).start_step());
  EXPECT_EQ(gens.WithoutProgressInARow(), 1);

  // Generation 2 starts from the checkpoint at step 100: 20 steps redone,
  // counted from generation 0 (the last one that trained).
  Place(&job, 2, 2, 5300);
  EXPECT_EQ(gens.WithoutProgressInARow(), 2);
  EXPECT_EQ(gens.Commit(100, 0.25),
            "generation 2 training from step 100 on 2 workers (re-formed in 0.25 s; "
            "20 steps redone)");
  EXPECT_EQ(gens.WithoutProgressInARow(), 0);
  EXPECT_EQ(job.generations(2).steps_redone(), 20);

  // A fenced rank of generation 0 says it got further than rank 0 told:
  // generation 0's end and generation 2's steps redone move with it.
  v1::WorkerMessage::JobDone late;
  late.set_job_id("j-1");
  late.set_rank(2);
  late.set_steps(130);
  EXPECT_FALSE(gens.EndedRankDone("w1", late));  // not that rank's worker
  EXPECT_TRUE(gens.EndedRankDone("w2", late));
  EXPECT_EQ(job.generations(0).end_step(), 130);
  EXPECT_EQ(job.generations(2).steps_redone(), 30);
  late.set_steps(125);
  EXPECT_FALSE(gens.EndedRankDone("w2", late));  // never moves back
  late.set_job_id("j-1.g2");
  late.set_steps(500);
  EXPECT_FALSE(gens.EndedRankDone("w20", late));  // the running generation
}

TEST(GenerationsTest, TheCoordinatorsLaneHasASpanPerGenerationAndReformation) {
  v1::Job job;
  job.set_id("j-1");
  Generations gens(&job);
  Place(&job, 0, 2, 1000);
  gens.Commit(0, 0);
  job.set_step(10);
  gens.End("lost", "w1", 1, 3000);
  Place(&job, 1, 1, 3500);
  gens.Commit(8, 0.5);
  const v1::WorkerTrace t = Generations::Trace(job, 9000);
  EXPECT_EQ(t.rank(), -1);
  ASSERT_EQ(t.events_size(), 4);
  EXPECT_EQ(t.events(0).thread(), Generations::kGenerationsThread);
  EXPECT_EQ(t.events(0).dur_us(), 2000 * 1000);  // 1000 -> 3000 ms
  EXPECT_EQ(t.events(1).dur_us(), -1);           // the end: an instant
  EXPECT_EQ(t.events(2).thread(), Generations::kReformationsThread);
  EXPECT_EQ(t.events(2).dur_us(), 500000);
  EXPECT_EQ(t.events(2).name(), "re-formation: 2 steps redone");
  EXPECT_EQ(t.events(3).dur_us(), (9000 - 3500) * 1000);  // runs until now
}

}  // namespace
}  // namespace gradsync
