// Elastic job specs (JobSpec.elastic, min_workers, elastic_wait_ms):
// defaults filled in, and what cannot re-form refused naming the field.
#include <string>

#include <gtest/gtest.h>

#include "common/spec/job_limits.h"
#include "common/spec/job_spec.h"
#include "tests/common/spec_test_util.h"

namespace gradsync {
namespace {

using spec_testing::ExpectBad;
using spec_testing::Good;

TEST(JobSpec, ElasticJobsGetDefaultsAndRefuseWhatCannotReForm) {
  v1::JobSpec s = Good();
  s.set_workers(4);
  s.set_min_workers(2);
  ExpectBad(s, "min_workers");  // not elastic
  s.set_min_workers(0);
  s.set_elastic_wait_ms(100);
  ExpectBad(s, "elastic_wait_ms");
  s.set_elastic_wait_ms(0);
  s.set_elastic(true);
  absl::StatusOr<v1::JobSpec> ok = ValidateJobSpec(s, 1);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->min_workers(), 1);
  EXPECT_EQ(ok->elastic_wait_ms(), kDefaultElasticWaitMs);
  EXPECT_EQ(ok->checkpoint_every(), kDefaultElasticCheckpointEvery);
  s.set_checkpoint_every(7);
  s.set_min_workers(4);
  ok = ValidateJobSpec(s, 1);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->checkpoint_every(), 7);
  for (v1::Strategy strategy : {v1::STRATEGY_PS, v1::STRATEGY_ALLREDUCE}) {
    for (v1::SyncMode mode : {v1::SYNC_MODE_SYNC, v1::SYNC_MODE_ASYNC}) {
      s.set_strategy(strategy);
      s.set_mode(mode);
      EXPECT_TRUE(ValidateJobSpec(s, 1).ok()) << StrategyLabel(s);
    }
  }
  s.set_min_workers(5);
  ExpectBad(s, "min_workers");  // more than workers
  s.set_min_workers(-1);
  ExpectBad(s, "min_workers");
  s.set_min_workers(2);
  s.set_elastic_wait_ms(-5);
  ExpectBad(s, "elastic_wait_ms");
  s.set_elastic_wait_ms(kMaxElasticWaitMs + 1);
  ExpectBad(s, "elastic_wait_ms");
  s.set_elastic_wait_ms(0);
  s.set_groups("0,0,1,1");
  ExpectBad(s, "elastic");  // groups are per rank
  s.clear_groups();
  s.set_strategy(v1::STRATEGY_ALLREDUCE);
  s.set_device(v1::DEVICE_CUDA);
  ExpectBad(s, "elastic");  // ring on cuda cannot checkpoint
}

}  // namespace
}  // namespace gradsync
