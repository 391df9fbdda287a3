// JobTable::Submit with resume_from: the old job must be known and ended.
#include <gtest/gtest.h>

#include "common/env.h"
#include "server/coordinator/job_table.h"
#include "server/coordinator/worker_registry.h"
#include "tests/server/job_table_test_util.h"

namespace gradsync {
namespace {

TEST(JobResume, OnlyFromAKnownJobThatHasEnded) {
  FakeEnv clock;
  WorkerRegistry workers;
  JobTableOptions o;
  o.ps_addresses = {"ps0:1"};
  JobTable table(o, &workers, &clock);
  v1::JobSpec spec = Spec(v1::STRATEGY_PS, 2);
  spec.set_checkpoint_every(5);
  Decisions d;
  absl::StatusOr<v1::Job> old = table.Submit(spec, &d);  // queued: no workers
  ASSERT_TRUE(old.ok()) << old.status();

  v1::JobSpec resume = spec;
  resume.set_resume_from("j-404");
  EXPECT_TRUE(absl::IsNotFound(table.Submit(resume, &d).status()));
  resume.set_resume_from(old->id());
  absl::Status st = table.Submit(resume, &d).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  ASSERT_TRUE(table.Cancel(old->id(), &d).ok());
  absl::StatusOr<v1::Job> resumed = table.Submit(resume, &d);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->spec().resume_from(), old->id());
}

}  // namespace
}  // namespace gradsync
