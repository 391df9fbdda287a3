// JobSpec validation: every bad field gets INVALID_ARGUMENT naming it.
#include <gtest/gtest.h>

#include "common/spec/job_spec.h"

namespace gradsync {
namespace {

v1::JobSpec Good() {
  v1::JobSpec s;
  s.set_workers(4);
  s.set_batch_size(32);
  return s;
}

void ExpectBad(const v1::JobSpec& s, const std::string& field) {
  auto r = ValidateJobSpec(s, 1);
  ASSERT_FALSE(r.ok()) << field;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(r.status().message()).rfind(field + ":", 0), 0u)
      << r.status().message();
}

TEST(JobSpec, DefaultsAreFilledIn) {
  auto r = ValidateJobSpec(Good(), 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->strategy(), "ring");
  EXPECT_EQ(r->mode(), "sync");
  EXPECT_EQ(r->model(), "mlp:784-256-128-10");
  EXPECT_EQ(r->epochs(), 1);
  v1::JobSpec s = Good();
  s.set_mode("async");
  r = ValidateJobSpec(s, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->staleness(), 1);  // ring async default
}

TEST(JobSpec, BadFieldsAreNamed) {
  v1::JobSpec s = Good();
  s.set_workers(0);
  ExpectBad(s, "workers");
  s = Good();
  s.set_workers(-3);
  ExpectBad(s, "workers");
  s = Good();
  s.set_strategy("allgather");
  ExpectBad(s, "strategy");
  s = Good();
  s.set_mode("eventually");
  ExpectBad(s, "mode");
  s = Good();
  s.set_model("resnet:50");
  ExpectBad(s, "model");
  s = Good();
  s.set_model("mlp:100-10");
  ExpectBad(s, "model");  // input width != 784
  s = Good();
  s.set_model("mlp:784-7");
  ExpectBad(s, "model");  // output width != 10
  s = Good();
  s.set_batch_size(0);
  ExpectBad(s, "batch_size");
  s = Good();
  s.set_staleness(-1);
  ExpectBad(s, "staleness");
  s = Good();
  s.set_lr(-1);
  ExpectBad(s, "lr");
  s = Good();
  s.set_optimizer("lbfgs");
  ExpectBad(s, "optimizer");
  s = Good();
  s.set_device("tpu");
  ExpectBad(s, "device");
  s = Good();
  s.set_strategy("ps");
  s.set_ps_shards(3);
  ExpectBad(s, "ps_shards");  // only 1 available
  s = Good();
  s.set_momentum(1.5f);
  ExpectBad(s, "momentum");
}

}  // namespace
}  // namespace gradsync
