// JobOptionsOf: every field the worker's layers read comes across from a
// validated assignment, and what validation would refuse is refused here too.
#include <gtest/gtest.h>

#include "common/spec/assignment_options.h"
#include "common/spec/job_spec.h"

namespace gradsync {
namespace {

v1::Assignment Valid(v1::Strategy strategy, v1::SyncMode mode) {
  v1::JobSpec s;
  s.set_workers(3);
  s.set_batch_size(16);
  s.set_strategy(strategy);
  s.set_mode(mode);
  s.set_optimizer(v1::OPTIMIZER_ADAM);
  s.set_lr(0.002f);
  s.set_seed(42);
  s.set_steps(17);
  s.set_train_limit(900);
  s.set_bucket_bytes(4096);
  s.set_chunk_bytes(8192);
  s.set_step_timeout_ms(1234);
  s.set_algorithm(v1::ALGORITHM_HIERARCHICAL);
  s.set_groups("0,0,1");
  s.set_wire_dtype(v1::WIRE_DTYPE_BF16);
  s.set_trace(true);
  v1::RankSlowdown* slow = s.add_slow_ranks();  // this rank (2), and another
  slow->set_rank(2);
  slow->set_factor(3);
  slow = s.add_slow_ranks();
  slow->set_rank(0);
  slow->set_factor(5);
  absl::StatusOr<v1::JobSpec> valid = ValidateJobSpec(s, 2);
  EXPECT_TRUE(valid.ok()) << valid.status();
  v1::Assignment a;
  a.set_job_id("j-1");
  *a.mutable_spec() = *valid;
  a.set_rank(2);
  a.set_world_size(3);
  for (const char* p : {"h0:1", "h1:2", "h2:3"}) a.add_peer_addresses(p);
  v1::PsShardInfo* shard = a.add_ps_shards();
  shard->set_address("ps:5");
  shard->set_partition_bytes(1 << 20);
  for (int w : {784, 10}) a.add_layer_widths(w);
  a.set_num_params(7850);
  a.set_job_secret("secret");
  a.set_resume_secret("old");
  a.set_resume_world(5);
  return a;
}

TEST(JobOptionsOf, CarriesEveryFieldTheWorkerReads) {
  absl::StatusOr<JobOptions> o =
      JobOptionsOf(Valid(v1::STRATEGY_PS, v1::SYNC_MODE_ASYNC));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->job_id, "j-1");
  EXPECT_EQ(o->rank, 2);
  EXPECT_EQ(o->world_size, 3);
  EXPECT_EQ(o->peer_addresses, (std::vector<std::string>{"h0:1", "h1:2", "h2:3"}));
  ASSERT_EQ(o->ps_shards.size(), 1u);
  EXPECT_EQ(o->ps_shards[0].address, "ps:5");
  EXPECT_EQ(o->ps_shards[0].partition_bytes, 1 << 20);
  EXPECT_EQ(o->layer_widths, (std::vector<int>{784, 10}));
  EXPECT_EQ(o->num_params, 7850u);
  EXPECT_DOUBLE_EQ(o->compute_slowdown, 3);
  EXPECT_EQ(o->job_secret, "secret");
  EXPECT_EQ(o->resume_secret, "old");
  EXPECT_EQ(o->resume_world, 5);
  EXPECT_EQ(o->strategy, SyncStrategy::kPs);
  EXPECT_EQ(o->mode, SyncMode::kAsync);
  EXPECT_FALSE(o->staleness.has_value());  // ps async: unbounded
  EXPECT_EQ(o->algorithm, AllreduceAlgorithm::kHierarchical);
  EXPECT_EQ(o->groups, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(o->chunk_bytes, 8192u);
  EXPECT_EQ(o->bucket_bytes, 4096);
  EXPECT_EQ(o->wire_dtype, WireDtype::kBf16);
  EXPECT_EQ(o->step_timeout, absl::Milliseconds(1234));
  EXPECT_EQ(o->optimizer.kind, OptimizerKind::kAdam);
  EXPECT_FLOAT_EQ(o->optimizer.lr, 0.002f);
  EXPECT_EQ(o->seed, 42u);
  EXPECT_EQ(o->batch_size, 16);
  EXPECT_EQ(o->steps, 17);
  EXPECT_EQ(o->train_limit, 900);
  EXPECT_TRUE(o->trace);
  EXPECT_FALSE(o->is_bench);
  EXPECT_FALSE(o->cuda);
  EXPECT_FALSE(o->allow_tf32);
  EXPECT_EQ(o->max_batch, 16);  // no global batch: the job's batch size
}

// The device settings the worker builds its model from: device, TF32 and
// the largest slice of an elastic generation's global batch (rounded up).
TEST(JobOptionsOf, CarriesTheDeviceAndTheLargestBatchOfAGeneration) {
  v1::Assignment a = Valid(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_SYNC);
  a.mutable_spec()->set_device(v1::DEVICE_CUDA);
  a.mutable_spec()->set_tf32(true);
  a.set_global_batch(50);  // over 3 ranks: 16, 17 or 17 samples
  absl::StatusOr<JobOptions> o = JobOptionsOf(a);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->cuda);
  EXPECT_TRUE(o->allow_tf32);
  EXPECT_EQ(o->max_batch, 17);
}

TEST(JobOptionsOf, AllreduceAsyncGetsTheValidatorsStaleness) {
  absl::StatusOr<JobOptions> o =
      JobOptionsOf(Valid(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_ASYNC));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->strategy, SyncStrategy::kAllreduce);
  ASSERT_TRUE(o->staleness.has_value());
  EXPECT_EQ(*o->staleness, kDefaultAllreduceAsyncStaleness);
}

TEST(JobOptionsOf, ABenchJobsUnsetSwitchesReadAsTheDefaults) {
  v1::Assignment a;
  a.set_job_id("b-1");
  a.set_world_size(2);
  v1::JobSpec* spec = a.mutable_spec();
  spec->set_kind(v1::JOB_KIND_BENCH);
  spec->mutable_bench()->set_op(v1::BENCH_OP_PUSHPULL);
  spec->mutable_bench()->add_sizes(4096);
  spec->mutable_bench()->add_sizes(8);
  spec->mutable_bench()->set_iters(5);
  spec->mutable_bench()->set_warmup(2);
  absl::StatusOr<JobOptions> o = JobOptionsOf(a);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->strategy, SyncStrategy::kAllreduce);
  EXPECT_EQ(o->mode, SyncMode::kSync);
  EXPECT_TRUE(o->groups.empty());
  EXPECT_TRUE(o->is_bench);
  EXPECT_EQ(o->bench.op, BenchOp::kPushPull);
  EXPECT_EQ(o->bench.sizes, (std::vector<int64_t>{4096, 8}));
  EXPECT_EQ(o->bench.iters, 5);
  EXPECT_EQ(o->bench.warmup, 2);
  // A bench job without a known op is refused.
  spec->mutable_bench()->set_op(static_cast<v1::BenchOp>(99));
  EXPECT_TRUE(absl::IsInvalidArgument(JobOptionsOf(a).status()));
}

TEST(JobOptionsOf, WhatValidationRefusesIsRefused) {
  v1::Assignment a = Valid(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_SYNC);
  a.mutable_spec()->set_strategy(static_cast<v1::Strategy>(99));
  EXPECT_TRUE(absl::IsInvalidArgument(JobOptionsOf(a).status()));
  a = Valid(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_SYNC);
  a.mutable_spec()->set_mode(static_cast<v1::SyncMode>(99));
  EXPECT_TRUE(absl::IsInvalidArgument(JobOptionsOf(a).status()));
  a = Valid(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_SYNC);
  a.mutable_spec()->set_groups("0,1");  // three ranks
  EXPECT_TRUE(absl::IsInvalidArgument(JobOptionsOf(a).status()));
  a = Valid(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_SYNC);
  a.mutable_spec()->set_wire_dtype(static_cast<v1::WireDtype>(99));
  EXPECT_TRUE(absl::IsInvalidArgument(JobOptionsOf(a).status()));
  a = Valid(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_SYNC);
  a.set_rank(3);  // world 3
  EXPECT_TRUE(absl::IsInvalidArgument(JobOptionsOf(a).status()));
}

}  // namespace
}  // namespace gradsync
