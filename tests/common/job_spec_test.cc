// JobSpec validation: every bad field gets INVALID_ARGUMENT naming it.
#include <gtest/gtest.h>

#include "common/ps_layout.h"
#include "common/spec/job_spec.h"
#include "common/spec/model_spec.h"
#include "tests/common/spec_test_util.h"

namespace gradsync {
namespace {

using spec_testing::ExpectBad;
using spec_testing::Good;

TEST(JobSpec, DefaultsAreFilledIn) {
  auto r = ValidateJobSpec(Good(), 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->strategy(), v1::STRATEGY_ALLREDUCE);
  EXPECT_EQ(r->mode(), v1::SYNC_MODE_SYNC);
  EXPECT_EQ(r->device(), v1::DEVICE_CPU);
  EXPECT_EQ(r->optimizer(), v1::OPTIMIZER_SGD);
  EXPECT_EQ(r->step_timeout_ms(), kDefaultStepTimeoutMs);
  EXPECT_EQ(r->bucket_bytes(), kDefaultBucketBytes);
  EXPECT_EQ(r->model(), "mlp:784-256-128-10");
  EXPECT_EQ(r->epochs(), 1);
  EXPECT_EQ(r->peer_bulk_bytes(), kDefaultPeerBulkBytes);
  v1::JobSpec s = Good();
  s.set_mode(v1::SYNC_MODE_ASYNC);
  r = ValidateJobSpec(s, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->staleness(), 1);  // ring async default
}

TEST(JobSpec, PeerBulkBytesKeepsNeverAndExplicitSizes) {
  for (int64_t v : {int64_t{-1}, int64_t{1}, int64_t{64} << 20}) {
    v1::JobSpec s = Good();
    s.set_peer_bulk_bytes(v);
    auto r = ValidateJobSpec(s, 1);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->peer_bulk_bytes(), v);
  }
}

TEST(JobSpec, BadFieldsAreNamed) {
  v1::JobSpec s = Good();
  s.set_workers(0);
  ExpectBad(s, "workers");
  s = Good();
  s.set_workers(-3);
  ExpectBad(s, "workers");
  s = Good();
  s.set_strategy(static_cast<v1::Strategy>(7));
  ExpectBad(s, "strategy");
  s = Good();
  s.set_mode(static_cast<v1::SyncMode>(9));
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
  // TorchScript models reach the server as hashes of uploaded files.
  s = Good();
  s.set_model("torchscript:/home/me/model.pt");
  ExpectBad(s, "model");  // a path the client did not upload
  s = Good();
  s.set_model("torchscript:sha256:" + std::string(63, 'a'));
  ExpectBad(s, "model");
  s = Good();
  s.set_model("torchscript:sha256:" + std::string(64, 'A'));
  ExpectBad(s, "model");  // lowercase hex only
  s = Good();
  s.set_model("torchscript:sha256:" + std::string(64, 'a'));
  s.set_device(v1::DEVICE_CUDA);
  ExpectBad(s, "model");  // Debian's libtorch has no CUDA
  s = Good();
  s.set_model("torchscript:sha256:" + std::string(64, 'a'));
  {
    auto ok = ValidateJobSpec(s, 1);
    ASSERT_TRUE(ok.ok()) << ok.status();
    EXPECT_EQ(ok->model(), s.model());
  }
  // Tensor data sets: uploaded, and for TorchScript models only.
  s.set_dataset("tensors:/data/x.pt");
  ExpectBad(s, "dataset");
  s.set_dataset("tensors:sha256:" + std::string(64, 'b'));
  EXPECT_TRUE(ValidateJobSpec(s, 1).ok());
  s.set_model("mlp:784-10");
  ExpectBad(s, "dataset");
  // Data read on each worker: a hash and an absolute path.
  s = Good();
  s.set_model("torchscript:sha256:" + std::string(64, 'a'));
  const std::string on_workers = "tensors-on-workers:sha256:" + std::string(64, 'c');
  s.set_dataset(on_workers + ":/data/corpus:v2.pt");
  {
    auto ok = ValidateJobSpec(s, 1);
    ASSERT_TRUE(ok.ok()) << ok.status();
    absl::StatusOr<WorkerTensorData> d = WorkerTensorDataOf(ok->dataset());
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->sha256, std::string(64, 'c'));
    EXPECT_EQ(d->path, "/data/corpus:v2.pt");
    EXPECT_EQ(WorkerTensorDataSpec(*d), s.dataset());
  }
  for (const std::string& bad :
       {std::string("tensors-on-workers:/data/x.pt"), on_workers + ":data/x.pt",
        on_workers + ":", on_workers, on_workers + "/data/x.pt",
        "tensors-on-workers:sha256:" + std::string(64, 'C') + ":/x",
        on_workers + ":/x" + std::string(1, '\0') + "y",
        on_workers + ":/" + std::string(5000, 'p')}) {
    s.set_dataset(bad);
    ExpectBad(s, "dataset");
  }
  s.set_dataset(on_workers + ":/data/x.pt");
  s.set_model("mlp:784-10");
  ExpectBad(s, "dataset");
  s = Good();
  s.set_dataset("imagenet");
  ExpectBad(s, "dataset");
  s = Good();
  s.set_batch_size(0);
  ExpectBad(s, "batch_size");
  s = Good();
  s.set_staleness(-1);
  ExpectBad(s, "staleness");
  s = Good();
  s.set_mode(v1::SYNC_MODE_ASYNC);
  s.set_staleness(2147483647);
  ExpectBad(s, "staleness");  // ring async: staleness + 2 gradient copies
  s = Good();
  s.set_lr(-1);
  ExpectBad(s, "lr");
  s = Good();
  s.set_optimizer(static_cast<v1::Optimizer>(5));
  ExpectBad(s, "optimizer");
  s = Good();
  s.set_device(static_cast<v1::Device>(3));
  ExpectBad(s, "device");
  s = Good();
  s.set_strategy(v1::STRATEGY_PS);
  s.set_ps_shards(3);
  ExpectBad(s, "ps_shards");  // only 1 available
  s = Good();
  s.set_momentum(1.5f);
  ExpectBad(s, "momentum");
}

TEST(JobSpec, CapsRefuseSpecsThatWouldExhaustADaemon) {
  v1::JobSpec s = Good();
  s.set_model("mlp:784-1048576-1048576-10");  // 1.1e12 parameters
  ExpectBad(s, "model");
  s = Good();
  s.set_name(std::string(64 << 20, 'x'));  // the 64 MiB name once accepted
  ExpectBad(s, "name");
  s = Good();
  s.set_data_dir(std::string(kMaxPathBytes + 1, '/'));
  ExpectBad(s, "data_dir");
  s = Good();
  s.set_workers(kMaxWorkers + 1);
  ExpectBad(s, "workers");
  s = Good();
  s.set_batch_size(kMaxBatchSize + 1);
  ExpectBad(s, "batch_size");
  s = Good();
  s.set_steps(kMaxSteps + 1);
  ExpectBad(s, "steps");
  s = Good();
  s.set_chunk_bytes(kMaxChunkBytes + 1);
  ExpectBad(s, "chunk_bytes");
  s = Good();
  s.set_connections_per_peer(kMaxConnectionsPerPeer + 1);
  ExpectBad(s, "connections_per_peer");
  s = Good();
  s.set_connections_per_peer(-1);
  ExpectBad(s, "connections_per_peer");
  s = Good();
  s.set_peer_bulk_bytes(-2);
  ExpectBad(s, "peer_bulk_bytes");
  s = Good();
  s.set_strategy(v1::STRATEGY_PS);
  s.set_mode(v1::SYNC_MODE_ASYNC);
  s.set_staleness(2147483647);
  ExpectBad(s, "staleness");
  // At the caps, specs are fine.
  s = Good();
  s.set_name(std::string(kMaxNameBytes, 'x'));
  s.set_workers(kMaxWorkers);
  EXPECT_TRUE(ValidateJobSpec(s, 1).ok());
}

TEST(JobSpecNames, ParseAndNameRoundTrip) {
  for (const char* n : {"ps", "allreduce"}) {
    auto v = ParseStrategy(n);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(StrategyName(*v), n);
  }
  for (const char* n : {"sync", "async"}) {
    auto v = ParseSyncMode(n);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(SyncModeName(*v), n);
  }
  for (const char* n : {"cpu", "cuda"}) {
    auto v = ParseDevice(n);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(DeviceName(*v), n);
  }
  for (const char* n : {"sgd", "adam"}) {
    auto v = ParseOptimizer(n);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(OptimizerName(*v), n);
  }
  for (const char* n : {"auto", "ring", "hd", "rd", "hier"}) {
    auto v = ParseAlgorithm(n);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(AlgorithmName(*v), n);
  }
  // The old names still read: the strategy was "ring" (STRATEGY_RING on the
  // wire, an alias), recursive doubling "tree"; both are printed anew.
  auto ring = ParseStrategy("ring");
  ASSERT_TRUE(ring.ok()) << ring.status();
  EXPECT_EQ(*ring, v1::STRATEGY_ALLREDUCE);
  // The wire's old name is an alias (saved histories and clients read it).
  const auto* old_name =                                            // the old name
      v1::Strategy_descriptor()->FindValueByName("STRATEGY_RING");  // old name
  ASSERT_NE(old_name, nullptr);
  EXPECT_EQ(old_name->number(), v1::STRATEGY_ALLREDUCE);
  EXPECT_EQ(v1::Strategy_Name(v1::STRATEGY_ALLREDUCE), "STRATEGY_ALLREDUCE");
  EXPECT_EQ(StrategyName(*ring), "allreduce");
  auto tree = ParseAlgorithm("tree");
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_EQ(*tree, v1::ALGORITHM_RECURSIVE_DOUBLING);
  EXPECT_EQ(AlgorithmName(*tree), "rd");
  EXPECT_NE(OldAlgorithmSpellingNote("tree").find("'rd'"), std::string::npos);
  EXPECT_EQ(OldAlgorithmSpellingNote("rd"), "");
  EXPECT_EQ(StrategyName(static_cast<v1::Strategy>(42)), "unknown(42)");
  EXPECT_EQ(SyncModeName(v1::SYNC_MODE_UNSPECIFIED), "unspecified");
}

TEST(JobSpecNames, UnknownTextNamesTheField) {
  auto s = ParseStrategy("gossip");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.status().message()).rfind("strategy: ", 0), 0u) << s.status();
  EXPECT_EQ(ParseSyncMode("lazy").status().message().substr(0, 5), "mode:");
  EXPECT_EQ(ParseDevice("tpu").status().message().substr(0, 7), "device:");
  EXPECT_EQ(ParseOptimizer("lbfgs").status().message().substr(0, 10), "optimizer:");
  EXPECT_EQ(ParseAlgorithm("bruck").status().message().substr(0, 10), "algorithm:");
  EXPECT_FALSE(ParseStrategy("PS").ok());  // names are exact
}

TEST(JobSpecValidation, AlgorithmDefaultsToAutoAndRejectsUnknownValues) {
  auto v = ValidateJobSpec(Good(), 1);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->algorithm(), v1::ALGORITHM_AUTO);
  v1::JobSpec s = Good();
  s.set_algorithm(static_cast<v1::Algorithm>(99));
  auto bad = ValidateJobSpec(s, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(std::string(bad.status().message()).rfind("algorithm: ", 0), 0u)
      << bad.status();
}

TEST(JobSpecValidation, WireDtypeDefaultsToFp32AndRejectsUnknownValues) {
  auto v = ValidateJobSpec(Good(), 1);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->wire_dtype(), v1::WIRE_DTYPE_FP32);
  for (const char* name : {"fp32", "bf16", "fp16"}) {
    auto parsed = ParseWireDtype(name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(WireDtypeName(*parsed), name);
    v1::JobSpec s = Good();
    s.set_wire_dtype(*parsed);
    EXPECT_TRUE(ValidateJobSpec(s, 1).ok()) << name;
  }
  EXPECT_EQ(ParseWireDtype("fp8").status().message().substr(0, 11), "wire_dtype:");
  v1::JobSpec s = Good();
  s.set_wire_dtype(static_cast<v1::WireDtype>(9));
  auto bad = ValidateJobSpec(s, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(std::string(bad.status().message()).rfind("wire_dtype: ", 0), 0u)
      << bad.status();
}

TEST(JobSpecNames, LabelShowsStaleness) {
  v1::JobSpec s = Good();
  s.set_strategy(v1::STRATEGY_ALLREDUCE);
  s.set_mode(v1::SYNC_MODE_ASYNC);
  s.set_staleness(2);
  EXPECT_EQ(StrategyLabel(s), "allreduce-async(s=2)");
  s.set_weight_prediction(v1::WEIGHT_PREDICTION_ON);
  EXPECT_EQ(StrategyLabel(s), "allreduce-async(s=2,wp)");
  s.set_weight_prediction(v1::WEIGHT_PREDICTION_OFF);
  s.set_strategy(v1::STRATEGY_PS);
  s.set_mode(v1::SYNC_MODE_SYNC);
  EXPECT_EQ(StrategyLabel(s), "ps-sync");
}

TEST(JobSpecValidation, GroupsNeedOneValidIdPerWorker) {
  v1::JobSpec s = Good();  // 4 workers
  s.set_groups("0, 0,1,1");
  auto v = ValidateJobSpec(s, 1);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*ParseGroups(v->groups(), 4), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_TRUE(ParseGroups("", 4)->empty());
  for (const char* bad :
       {"0,0,1", "0,0,1,1,2", "0,0,x,1", "0,-1,1,1", "0,,1,1", "0,0,1,99999"}) {
    s.set_groups(bad);
    ExpectBad(s, "groups");
  }
}

TEST(JobSpecValidation, SlowRanksAreRanksOfTheJobWithAFactorFromOneToAHundred) {
  absl::StatusOr<std::vector<v1::RankSlowdown>> two = ParseSlowRanks(" 3:2.5,0:1 ");
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].rank(), 3);
  EXPECT_DOUBLE_EQ((*two)[0].factor(), 2.5);
  EXPECT_TRUE(ParseSlowRanks("")->empty());
  for (const char* bad : {"3", "3:", ":2", "x:2", "3:x", "3:2:1", "3:0.5", "3:101",
                          "3:nan", "-1:2", "1:2,1:3", "1:2,,2:2"}) {
    absl::StatusOr<std::vector<v1::RankSlowdown>> r = ParseSlowRanks(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(r.status().message().rfind("slow_ranks: ", 0), 0u) << r.status();
  }
  v1::JobSpec s = Good();  // 4 workers
  for (const v1::RankSlowdown& r : *two) *s.add_slow_ranks() = r;
  absl::StatusOr<v1::JobSpec> v = ValidateJobSpec(s, 1);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(SlowRanksText(*v), "3:2.5,0:1");
  s.mutable_slow_ranks(0)->set_rank(4);  // one past the last rank
  ExpectBad(s, "slow_ranks");
  s.mutable_slow_ranks(0)->set_rank(3);
  s.mutable_slow_ranks(0)->set_factor(0);
  ExpectBad(s, "slow_ranks");
}

TEST(JobSpecValidation, TuningTableMustParseAndFitItsCap) {
  v1::JobSpec s = Good();
  s.set_tuning_table("# tuned\n4 64KiB tree\n4 inf ring\n");
  auto v = ValidateJobSpec(s, 1);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->tuning_table(), s.tuning_table());  // sent on as given
  for (const char* bad :
       {"4 64KiB warp\n", "4 lots ring\n", "# no rule\n", "4 1KiB tree\n4 1KiB ring\n"}) {
    s.set_tuning_table(bad);
    ExpectBad(s, "tuning_table");
  }
  s.set_tuning_table(std::string(kMaxTuningTableBytes + 1, '#'));
  ExpectBad(s, "tuning_table");
}

v1::JobSpec GoodBench() {
  v1::JobSpec s;
  s.set_kind(v1::JOB_KIND_BENCH);
  s.set_workers(3);
  s.mutable_bench()->set_op(v1::BENCH_OP_ALLREDUCE);
  s.mutable_bench()->add_sizes(4096);
  s.mutable_bench()->add_sizes(1048580);
  s.mutable_bench()->set_iters(3);
  s.mutable_bench()->set_warmup(1);
  return s;
}

TEST(JobSpecBench, ModelChecksDoNotApplyToBenchJobs) {
  v1::JobSpec s = GoodBench();
  s.set_model("mlp:100-10");  // would be refused for training
  s.set_dataset("imagenet");
  s.set_batch_size(0);
  s.set_train_limit(1);
  auto r = ValidateJobSpec(s, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(IsBench(*r));
  EXPECT_FALSE(UsesPs(*r));
  EXPECT_EQ(r->algorithm(), v1::ALGORITHM_AUTO);
  EXPECT_EQ(r->chunk_bytes(), kDefaultChunkBytes);
  EXPECT_EQ(r->step_timeout_ms(), kDefaultStepTimeoutMs);
}

TEST(JobSpecBench, BadBenchFieldsAreNamed) {
  v1::JobSpec s = GoodBench();
  s.mutable_bench()->set_op(v1::BENCH_OP_UNSPECIFIED);
  ExpectBad(s, "bench.op");
  s = GoodBench();
  s.mutable_bench()->set_op(static_cast<v1::BenchOp>(9));
  ExpectBad(s, "bench.op");
  s = GoodBench();
  s.mutable_bench()->clear_sizes();
  ExpectBad(s, "bench.sizes");
  for (int64_t bad : {int64_t{0}, int64_t{6}, int64_t{-4}, kMaxBenchBytes + 4}) {
    s = GoodBench();
    s.mutable_bench()->add_sizes(bad);
    ExpectBad(s, "bench.sizes");
  }
  s = GoodBench();
  for (int i = 0; i < kMaxBenchSizes; ++i) s.mutable_bench()->add_sizes(4);
  ExpectBad(s, "bench.sizes");
  for (int iters : {0, -1, kMaxBenchIters + 1}) {
    s = GoodBench();
    s.mutable_bench()->set_iters(iters);
    ExpectBad(s, "bench.iters");
  }
  s = GoodBench();
  s.mutable_bench()->set_warmup(-1);
  ExpectBad(s, "bench.warmup");
  s = GoodBench();
  s.set_kind(static_cast<v1::JobKind>(7));
  ExpectBad(s, "kind");
  s = Good();
  s.mutable_bench()->set_iters(3);  // bench settings on a training job
  ExpectBad(s, "bench");
}

TEST(JobSpecBench, PushPullNeedsParameterServerShards) {
  v1::JobSpec s = GoodBench();
  s.mutable_bench()->set_op(v1::BENCH_OP_PUSHPULL);
  s.set_ps_shards(2);
  auto r = ValidateJobSpec(s, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(UsesPs(*r));
  auto refused = ValidateJobSpec(s, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(std::string(refused.status().message()).rfind("ps_shards:", 0), 0u);
  // allreduce and broadcast need none.
  s.mutable_bench()->set_op(v1::BENCH_OP_BROADCAST);
  EXPECT_TRUE(ValidateJobSpec(s, 0).ok());
}

TEST(JobSpecValidation, AnUnnamedPsPartitionSizeWaitsForPlacementAndANamedOneIsBounded) {
  // Whether the workers share a host decides the pick (JobTable::
  // PickPsPartitions): validation leaves 0.
  v1::JobSpec ps = Good();
  ps.set_strategy(v1::STRATEGY_PS);
  auto r = ValidateJobSpec(ps, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ps_partition_bytes(), 0);
  r = ValidateJobSpec(Good(), 1);  // allreduce
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ps_partition_bytes(), 0);
  for (int64_t ok : {int64_t{64} << 10, int64_t{1} << 20, int64_t{4} << 20}) {
    v1::JobSpec s = Good();
    s.set_strategy(v1::STRATEGY_PS);
    s.set_ps_partition_bytes(ok);
    r = ValidateJobSpec(s, 1);
    ASSERT_TRUE(r.ok()) << ok << ": " << r.status();
    EXPECT_EQ(r->ps_partition_bytes(), ok);
  }
  for (int64_t bad : {int64_t{-1}, int64_t{4}, (int64_t{64} << 10) - 4,
                      (int64_t{4} << 20) + 4, int64_t{1} << 40}) {
    v1::JobSpec s = Good();
    s.set_ps_partition_bytes(bad);
    ExpectBad(s, "ps_partition_bytes");
  }
}

TEST(JobSpecBench, AnUnnamedBenchPartitionStaysForTheWorkersButIsCheckedAsPicked) {
  // A bench's sizes are each cut as a model of that size (the workers pick
  // per size), so the spec keeps 0; the check uses the largest size's pick.
  v1::JobSpec s = GoodBench();
  s.mutable_bench()->set_op(v1::BENCH_OP_PUSHPULL);
  s.mutable_bench()->add_sizes(256 << 20);
  s.set_ps_shards(1);
  s.set_workers(10);  // 9 x 64 partitions of 4 MiB = 576 waiting: fits
  auto r = ValidateJobSpec(s, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ps_partition_bytes(), 0);
  // Even 4 MiB is too small for 20 workers (19 * 64 waiting): refused,
  // naming the largest size and only the remedy left.
  s.set_workers(20);
  auto refused = ValidateJobSpec(s, 1);
  ASSERT_FALSE(refused.ok());
  const std::string why(refused.status().message());
  EXPECT_NE(why.find("partitions of 4194304"), std::string::npos) << why;
  EXPECT_NE(why.find("use more shards"), std::string::npos) << why;
  // A size the job names is kept, or refused, never changed.
  s.set_workers(6);
  s.set_ps_partition_bytes(1 << 20);
  ExpectBad(s, "ps_partition_bytes", 1);
}

TEST(JobSpecValidation, AResumedPsJobKeepsTheSizeItsSpecNames) {
  // `submit --resume` copies the old job's stored spec, which names the
  // size placement picked (JobTable::PickPsPartitions); one without a size
  // is picked as a new job would be.
  v1::JobSpec s = Good();
  s.set_strategy(v1::STRATEGY_PS);
  s.set_resume_from("j-abcdef-1");
  auto r = ValidateJobSpec(s, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ps_partition_bytes(), 0);
  s.set_ps_partition_bytes(4 << 20);  // named (an old 4 MiB checkpoint): kept
  r = ValidateJobSpec(s, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ps_partition_bytes(), int64_t{4} << 20);
}

TEST(JobSpecBench, PushPullRefusesMorePartitionsThanAShardLetsWait) {
  // 64 MiB in 64 KiB partitions: 1024 partitions. On one shard, 3 workers
  // waiting for rank 0's Init could ask for 3072 of them at once.
  v1::JobSpec s = GoodBench();
  s.set_workers(4);
  s.mutable_bench()->set_op(v1::BENCH_OP_PUSHPULL);
  s.mutable_bench()->add_sizes(64 << 20);
  s.set_ps_partition_bytes(64 << 10);
  ExpectBad(s, "ps_partition_bytes", /*available_ps_shards=*/4);
  s.set_ps_shards(4);  // 256 per shard, 768 waiting: fine
  EXPECT_TRUE(ValidateJobSpec(s, 4).ok());
  s.set_ps_shards(1);
  s.set_ps_partition_bytes(1 << 20);  // 64 per shard
  EXPECT_TRUE(ValidateJobSpec(s, 4).ok());
  // A training job counts its model's parameters: 784-4096-4096-10 is
  // 80.2 MB, 1224 partitions of 64 KiB; unnamed, it is checked at the
  // pick for several hosts (1 MiB: 77 partitions).
  v1::JobSpec t = Good();
  t.set_strategy(v1::STRATEGY_PS);
  t.set_model("mlp:784-4096-4096-10");
  t.set_workers(2);
  t.set_ps_partition_bytes(64 << 10);
  ExpectBad(t, "ps_partition_bytes", 1);
  t.set_ps_shards(2);
  EXPECT_TRUE(ValidateJobSpec(t, 2).ok());
  t.set_ps_partition_bytes(0);
  t.set_ps_shards(1);
  t.set_workers(8);  // 7 x 77 = 539 > 512: the pick doubles to 2 MiB, fits
  EXPECT_TRUE(ValidateJobSpec(t, 1).ok());
  // Allreduce benches and ring jobs use no shards: no limit.
  s.mutable_bench()->set_op(v1::BENCH_OP_ALLREDUCE);
  s.set_ps_partition_bytes(64 << 10);
  EXPECT_TRUE(ValidateJobSpec(s, 0).ok());
}

TEST(JobSpecBench, PushPullBenchesRefuseSixteenBitWires) {
  v1::JobSpec s = GoodBench();
  s.mutable_bench()->set_op(v1::BENCH_OP_PUSHPULL);
  s.set_wire_dtype(v1::WIRE_DTYPE_BF16);
  auto r = ValidateJobSpec(s, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(std::string(r.status().message()).rfind("wire_dtype: ", 0), 0u) << r.status();
  s.mutable_bench()->set_op(v1::BENCH_OP_ALLREDUCE);
  EXPECT_TRUE(ValidateJobSpec(s, 1).ok());
}

TEST(JobSpecBench, BenchJobsRefuseTrace) {
  v1::JobSpec s = GoodBench();
  s.set_trace(true);
  auto r = ValidateJobSpec(s, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(std::string(r.status().message()).rfind("trace: ", 0), 0u) << r.status();
}

TEST(JobSpecBench, OpNamesRoundTrip) {
  for (v1::BenchOp op :
       {v1::BENCH_OP_ALLREDUCE, v1::BENCH_OP_BROADCAST, v1::BENCH_OP_PUSHPULL}) {
    auto parsed = ParseBenchOp(BenchOpName(op));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, op);
  }
  EXPECT_FALSE(ParseBenchOp("reduce").ok());
}

TEST(JobSpec, StallThresholdDefaultsToHalfTheStepTimeoutAndIsChecked) {
  v1::JobSpec s = Good();
  s.set_step_timeout_ms(6000);
  auto r = ValidateJobSpec(s, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stall_report_ms(), 3000);
  EXPECT_EQ(StallThreshold(*r), absl::Seconds(3));
  s.set_stall_report_ms(1500);
  r = ValidateJobSpec(s, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(StallThreshold(*r), absl::Milliseconds(1500));
  s.set_stall_report_ms(-1);
  ExpectBad(s, "stall_report_ms");
  s.set_stall_report_ms(6001);
  ExpectBad(s, "stall_report_ms");
}

}  // namespace
}  // namespace gradsync

namespace gradsync {
namespace {

TEST(JobSpec, CheckpointsAndResumeArePsAndRingOnCpu) {
  v1::JobSpec s = Good();
  s.set_strategy(v1::STRATEGY_PS);
  s.set_checkpoint_every(5);
  s.set_resume_from("j-3");
  EXPECT_TRUE(ValidateJobSpec(s, 1).ok());
  s.set_checkpoint_every(-1);
  ExpectBad(s, "checkpoint_every");
  s.set_checkpoint_every(5);
  s.set_mode(v1::SYNC_MODE_ASYNC);
  EXPECT_TRUE(ValidateJobSpec(s, 1).ok()) << "ps async checkpoints";
  s.set_strategy(v1::STRATEGY_ALLREDUCE);
  // Ring async: a checkpoint after step t holds the gradients of steps < t;
  // a resumed run restarts its pipeline at t.
  EXPECT_TRUE(ValidateJobSpec(s, 1).ok()) << "ring async checkpoints";
  s.set_mode(v1::SYNC_MODE_SYNC);
  EXPECT_TRUE(ValidateJobSpec(s, 1).ok()) << "ring sync checkpoints";
  s.set_device(v1::DEVICE_CUDA);
  ExpectBad(s, "checkpoint_every");  // no optimizer state export on cuda
  s.set_checkpoint_every(0);
  ExpectBad(s, "resume_from");
  s.set_device(v1::DEVICE_CPU);
  s.set_strategy(v1::STRATEGY_PS);
  for (const char* bad : {"../j-1", "a/b", ".hidden"}) {
    s.set_resume_from(bad);
    ExpectBad(s, "resume_from");
  }
}

}  // namespace
}  // namespace gradsync
