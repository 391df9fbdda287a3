#include "worker/bench_job/bench_runner.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/partition.h"
#include "common/ps_layout.h"
#include "worker/collectives/ring.h"
#include "worker/sync/allreduce_sync.h"
#include "worker/sync/ps_client.h"

namespace gradsync {
namespace {

// Buffers hold a pattern of period kPeriod: element i of rank r is
// (r + 1) * (i % kPeriod + 1). Sums over ranks are small integers, exact in
// float32 whatever the summation order, so results are checked bit for bit.
constexpr int kPeriod = 7;
// Elements of one pattern block (a multiple of kPeriod), copied and compared
// block by block.
constexpr size_t kBlock = kPeriod * 4096;
using Pattern = std::array<float, kPeriod>;

// Tags outside every size's bucket (a size's bucket is its index).
constexpr int32_t kBarrierBucket = 1 << 20;
constexpr int32_t kPingBucket = (1 << 20) + 1;
// Ping-pong: 1-float round trips for α, kBigBytes round trips for β.
constexpr int kSmallTries = 20;
constexpr int kBigTries = 10;
// Untimed round trips first: a fresh HTTP/2 stream starts with a small flow
// control window that BDP probing grows over the first megabytes, so early
// 4 MiB round trips measured the window, not the link (beta varied 3x
// between jobs with one warm-up).
constexpr int kWarmTries = 4;
constexpr size_t kBigBytes = size_t{4} << 20;

Pattern RankPattern(int rank) {
  Pattern p;
  for (int c = 0; c < kPeriod; ++c) p[c] = static_cast<float>((rank + 1) * (c + 1));
  return p;
}

// The sum of RankPattern(r) over r = 0..world-1.
Pattern SumPattern(int world) {
  Pattern p;
  const int64_t ranks = static_cast<int64_t>(world) * (world + 1) / 2;
  for (int c = 0; c < kPeriod; ++c) p[c] = static_cast<float>(ranks * (c + 1));
  return p;
}

std::vector<float> Block(const Pattern& p) {
  std::vector<float> block(kBlock);
  for (size_t i = 0; i < kBlock; ++i) block[i] = p[i % kPeriod];
  return block;
}

void FillPeriodic(const std::vector<float>& block, float* dst, size_t n) {
  for (size_t at = 0; at < n; at += kBlock) {
    std::memcpy(dst + at, block.data(), std::min(kBlock, n - at) * sizeof(float));
  }
}

// "" when got[0..n) equals the periodic `block` bit for bit; else the first
// differing element.
std::string CheckPeriodic(const std::vector<float>& block, const float* got, size_t n) {
  for (size_t at = 0; at < n; at += kBlock) {
    const size_t len = std::min(kBlock, n - at);
    if (std::memcmp(got + at, block.data(), len * sizeof(float)) == 0) continue;
    size_t i = 0;
    while (i < len && std::memcmp(&got[at + i], &block[i], sizeof(float)) == 0) ++i;
    return absl::StrCat("element ", at + i, ": got ", got[at + i], ", want ", block[i]);
  }
  return "";
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Seconds on `env`'s monotonic clock since its reading t0.
double SecondsSince(const Env* env, absl::Time t0) {
  return absl::ToDoubleSeconds(env->NowMonotonic() - t0);
}

}  // namespace

// One operation at one size, built once and run every iteration.
class BenchRunner::Case {
 public:
  virtual ~Case() = default;
  // The algorithm that runs ("ring", "hd", ...).
  virtual std::string algorithm() const = 0;
  // Once, before the first run (untimed).
  virtual absl::Status Prepare(absl::Time deadline) { return absl::OkStatus(); }
  // Before every run (untimed): the inputs of the next run.
  virtual void Fill() = 0;
  // The timed operation.
  virtual absl::Status Run(int64_t step) = 0;
  // After a run (untimed): "" when the result is exactly the expected one,
  // else the first difference.
  virtual std::string Verify() const = 0;
};

namespace {

// Sum-allreduce of this rank's pattern: every rank ends with SumPattern.
class AllreduceCase final : public BenchRunner::Case {
 public:
  AllreduceCase(std::unique_ptr<Allreduce> algo, size_t count, int rank, int world,
                int bucket)
      : algo_(std::move(algo)),
        bucket_(bucket),
        data_(count),
        fill_(Block(RankPattern(rank))),
        want_(Block(SumPattern(world))) {}
  std::string algorithm() const override {
    return std::string(AllreduceAlgorithmName(algo_->algorithm()));
  }
  void Fill() override { FillPeriodic(fill_, data_.data(), data_.size()); }
  absl::Status Run(int64_t step) override {
    return algo_->Run(data_.data(), step, bucket_);
  }
  std::string Verify() const override {
    return CheckPeriodic(want_, data_.data(), data_.size());
  }

 private:
  const std::unique_ptr<Allreduce> algo_;
  const int bucket_;
  std::vector<float> data_;
  const std::vector<float> fill_, want_;
};

// Ring broadcast of rank 0's pattern; the other ranks start from zeros.
class BroadcastCase final : public BenchRunner::Case {
 public:
  BroadcastCase(Transport* transport, size_t count, size_t segment_bytes,
                absl::Duration timeout, const Env* env)
      : transport_(transport),
        segment_bytes_(segment_bytes),
        timeout_(timeout),
        env_(env),
        data_(count),
        fill_(Block(transport->rank() == 0 ? RankPattern(0) : Pattern{})),
        want_(Block(RankPattern(0))) {}
  std::string algorithm() const override { return "ring"; }
  void Fill() override { FillPeriodic(fill_, data_.data(), data_.size()); }
  absl::Status Run(int64_t) override {
    return RingBroadcast(transport_, data_.data(), data_.size(), 0, segment_bytes_,
                         env_->Now() + timeout_);
  }
  std::string Verify() const override {
    return CheckPeriodic(want_, data_.data(), data_.size());
  }

 private:
  Transport* const transport_;
  const size_t segment_bytes_;
  const absl::Duration timeout_;
  const Env* const env_;
  std::vector<float> data_;
  const std::vector<float> fill_, want_;
};

// Push this rank's pattern as the gradient of PS step t, pull the
// parameters after it. The shards run sync SGD with lr 1 and no momentum
// from zeros, so after step t the parameters are p(t) = p(t-1) - m with
// m = float(sum) * (1.0f / N) (the shard's mean, computed here the same way
// in float32): known exactly on every rank.
class PushPullCase final : public BenchRunner::Case {
 public:
  // `client` has `partitions` partitions covering [0, count).
  PushPullCase(std::unique_ptr<PsClient> client, int partitions, size_t count, int rank,
               int world, absl::Duration timeout, const Env* env)
      : client_(std::move(client)),
        rank_(rank),
        world_(world),
        timeout_(timeout),
        env_(env),
        grad_(count),
        params_(count) {
    FillPeriodic(Block(RankPattern(rank)), grad_.data(), count);
    const Pattern sum = SumPattern(world);
    for (int c = 0; c < kPeriod; ++c) mean_[c] = sum[c] * (1.0f / world);
    for (int i = 0; i < partitions; ++i) all_.push_back(i);
  }
  PsClient* client() const { return client_.get(); }
  std::string algorithm() const override { return "ps"; }
  // 1. rank 0 installs zeros and the SGD config; 2. the others wait for it.
  absl::Status Prepare(absl::Time deadline) override {
    if (rank_ != 0) return client_->Pull(params_.data(), true, deadline);
    JobOptions config;  // what the shards need of a sync SGD job
    config.world_size = world_;
    config.mode = SyncMode::kSync;
    config.optimizer = {OptimizerKind::kSgd, /*lr=*/1.0f, /*momentum=*/0.0f};
    return client_->Init(params_.data(), ShardConfigOf(config, 0), deadline);
  }
  void Fill() override {
    std::fill(params_.begin(), params_.end(), 0.0f);
    for (int c = 0; c < kPeriod; ++c) want_[c] = want_[c] - mean_[c];
  }
  absl::Status Run(int64_t) override {
    return client_->PushPull(ps_step_++, grad_.data(), params_.data(), all_,
                             env_->Now() + timeout_);
  }
  std::string Verify() const override {
    return CheckPeriodic(Block(want_), params_.data(), params_.size());
  }

 private:
  const std::unique_ptr<PsClient> client_;
  const int rank_, world_;
  const absl::Duration timeout_;
  const Env* const env_;
  std::vector<float> grad_, params_;
  std::vector<int> all_;
  Pattern mean_{}, want_{};  // want_: the parameters after the next run
  int64_t ps_step_ = 0;
};

}  // namespace

namespace {

AllreduceOptions BenchAllreduceOptions(const JobOptions& job, const TuningTable* tuning,
                                       const Env* env) {
  AllreduceOptions o = AllreduceOptionsFor(job, tuning);
  o.env = env;
  return o;
}

}  // namespace

BenchRunner::BenchRunner(JobOptions job, Transport* transport, const TuningTable* tuning,
                         const Env* env)
    : job_(std::move(job)),
      transport_(transport),
      timeout_(job_.step_timeout),
      tuning_(tuning),
      env_(env),
      allreduce_options_(BenchAllreduceOptions(job_, tuning, env)) {}

BenchRunner::~BenchRunner() = default;

void BenchRunner::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = status;
  transport_->Abort(status);
  if (ps_ != nullptr) ps_->Abort(status);
}

absl::Status BenchRunner::CheckAborted() {
  absl::MutexLock lock(&mu_);
  return aborted_;
}

absl::StatusOr<BenchRankResult> BenchRunner::Run(const BenchProgressFn& progress) {
  if (absl::Status st = CheckAborted(); !st.ok()) return st;
  // Recursive doubling: every rank leaves after the same log2(N) exchanges,
  // where a ring barrier lets ranks go 2(N-1) hops apart.
  absl::StatusOr<std::unique_ptr<Allreduce>> barrier = MakeAllreduce(
      AllreduceAlgorithm::kRecursiveDoubling, transport_, 1, allreduce_options_);
  if (!barrier.ok()) return barrier.status();
  barrier_ = std::move(*barrier);
  BenchRankResult result;
  if (absl::Status st = MeasureLinks(&result); !st.ok()) return st;
  const BenchOptions& bench = job_.bench;
  const int sizes = static_cast<int>(bench.sizes.size());
  for (int i = 0; i < sizes; ++i) {
    absl::StatusOr<BenchRankRow> row = RunSize(i, bench.sizes[i]);
    if (!row.ok()) {
      return absl::Status(row.status().code(),
                          absl::StrCat(BenchOpName(bench.op), " of ", bench.sizes[i],
                                       " bytes: ", row.status().message()));
    }
    result.rows.push_back(*std::move(row));
    if (transport_->rank() == 0 && progress) progress(i + 1, sizes);
  }
  return result;
}

LinkPairs PickLinkPairs(const std::vector<int>& groups) {
  LinkPairs pairs;
  const int n = static_cast<int>(groups.size());
  if (n < 2) return pairs;
  if (groups[0] == groups[1]) {
    pairs.inside = {0, 1};
    for (int r = 2; r < n; ++r) {
      if (groups[r] != groups[0]) {
        pairs.between = {0, r};
        break;
      }
    }
    return pairs;
  }
  pairs.between = {0, 1};
  // The first pair in rank order: with rank 0 if its group has another
  // rank, else with rank 1, else any (then it measures while ranks 0 and 1
  // do, not after them).
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      if (groups[b] == groups[a]) {
        pairs.inside = {a, b};
        return pairs;
      }
    }
  }
  return pairs;
}

// Link tags (bucket kPingBucket) say which pair's ping-pong they carry in
// `segment`: ranks 0 and 1's, or the second pair's.
constexpr int kFirstPair = 0, kSecondPair = 1;

// 1. Ranks 0 and 1 measure their link (MeasurePair).
// 2. The other pair of PickLinkPairs, if any, measures its link: with ranks
//    host by host, ranks 0 and 1 often share a host, and their link is not
//    the one that a collective over several hosts waits for.
// 3. A barrier (a 1-float recursive-doubling allreduce): no rank starts the
//    sizes, and no traffic of theirs crosses a link, before both are done.
// Each pair's first rank reports its link (the coordinator merges them,
// bench_merge.h): the values never travel as tensor data, which a 16-bit
// wire format would round (fp16 tops out at 65504 bytes/s).
// A rank waits for 1 and 2 at most 3 step timeouts.
absl::Status BenchRunner::MeasureLinks(BenchRankResult* result) {
  const int world = transport_->size(), me = transport_->rank();
  std::vector<int> groups = allreduce_options_.groups;
  if (groups.empty()) {  // no peer addresses: a host per rank
    for (int r = 0; r < world; ++r) groups.push_back(r);
  }
  result->host_groups = groups;
  if (world < 2) return absl::OkStatus();
  const absl::Duration wait = 3 * timeout_;
  const absl::Time deadline = env_->Now() + wait;
  const LinkPairs pairs = PickLinkPairs(groups);
  const std::array<int, 2> first = {0, 1};
  const bool first_between = pairs.between == first;
  const std::array<int, 2> second = first_between ? pairs.inside : pairs.between;
  const auto link = [&](const std::array<int, 2>& ranks, bool between, float alpha,
                        float beta) {
    BenchLink& l = (between ? result->between_hosts : result->inside_host).emplace();
    l.rank_a = ranks[0];
    l.rank_b = ranks[1];
    l.alpha_seconds = alpha;
    l.beta_bytes_per_second = beta;
  };
  if (me <= 1) {
    float alpha = 0, beta = 0;
    absl::Status st = MeasurePair(0, 1, deadline, &alpha, &beta);
    if (!st.ok()) return st;
    if (me == 0) {
      result->alpha_seconds = alpha;
      result->beta_bytes_per_second = beta;
      link(first, first_between, alpha, beta);
    }
  }
  if (second[0] >= 0 && (me == second[0] || me == second[1])) {
    float alpha = 0, beta = 0;
    absl::Status st = MeasurePair(second[0], second[1], deadline, &alpha, &beta);
    if (!st.ok()) return st;
    if (me == second[0]) link(second, !first_between, alpha, beta);
  }
  AllreduceOptions options = allreduce_options_;
  options.timeout = wait;
  absl::StatusOr<std::unique_ptr<Allreduce>> barrier =
      MakeAllreduce(AllreduceAlgorithm::kRecursiveDoubling, transport_, 1, options);
  if (!barrier.ok()) return barrier.status();
  float one = 1.0f;
  return (*barrier)->Run(&one, NextStep(), kBarrierBucket);
}

absl::Status BenchRunner::MeasurePair(int a, int b, absl::Time first_deadline,
                                      float* alpha, float* beta) {
  absl::StatusOr<double> small = PingPong(a, b, 1, kSmallTries, first_deadline);
  if (!small.ok()) return small.status();
  absl::StatusOr<double> big =
      PingPong(a, b, kBigBytes / sizeof(float), kBigTries, Deadline());
  if (!big.ok()) return big.status();
  const double t = *small / 2;
  // Noise can make the big one-way time not exceed α; then all of it is
  // counted as transfer time.
  const double transfer = *big / 2 > t ? *big / 2 - t : *big / 2;
  *alpha = static_cast<float>(t);
  *beta = static_cast<float>(kBigBytes / std::max(transfer, 1e-12));
  return absl::OkStatus();
}

absl::StatusOr<double> BenchRunner::PingPong(int a, int b, size_t count, int tries,
                                             absl::Time first_deadline) {
  const bool sender = transport_->rank() == a;
  const int other = sender ? b : a;
  std::vector<float> buf(count, 1.0f);  // Send may round it (exact here)
  std::vector<double> round_trips;
  // The connection a collective of this size would use.
  transport_->BeginCollective(count * sizeof(float));
  // The first kWarmTries warm the connection and are not counted.
  for (int i = 0; i < kWarmTries + tries; ++i) {
    ChunkTag tag;
    tag.step = static_cast<int64_t>(count);
    tag.bucket = kPingBucket;
    tag.phase = CollectivePhase::kBroadcast;
    tag.segment = a == 0 && b == 1 ? kFirstPair : kSecondPair;
    tag.index = i;
    const absl::Time deadline = i == 0 ? first_deadline : Deadline();
    const absl::Time t0 = env_->NowMonotonic();
    if (sender) {
      absl::Status st = transport_->Send(other, tag, buf.data(), count);
      if (!st.ok()) return st;
      absl::StatusOr<std::unique_ptr<RecvChunk>> back =
          transport_->Recv(other, tag, count, deadline);
      if (!back.ok()) return back.status();
    } else {
      absl::StatusOr<std::unique_ptr<RecvChunk>> ping =
          transport_->Recv(other, tag, count, deadline);
      if (!ping.ok()) return ping.status();
      absl::Status st = transport_->Forward(other, tag, **ping);
      if (!st.ok()) return st;
    }
    if (i >= kWarmTries) round_trips.push_back(SecondsSince(env_, t0));
  }
  absl::Status st = transport_->WaitSendsReleased(Deadline());
  if (!st.ok()) return st;
  return Median(std::move(round_trips));
}

absl::Status BenchRunner::Barrier() {
  float one = 1.0f;
  return barrier_->Run(&one, NextStep(), kBarrierBucket);
}

absl::StatusOr<std::unique_ptr<BenchRunner::Case>> BenchRunner::MakeCase(int index,
                                                                         int64_t bytes) {
  const size_t count = static_cast<size_t>(bytes) / sizeof(float);
  const int rank = transport_->rank(), world = transport_->size();
  switch (job_.bench.op) {
    case BenchOp::kAllreduce: {
      absl::StatusOr<std::unique_ptr<Allreduce>> algo =
          MakeAllreduce(job_.algorithm, transport_, count, allreduce_options_);
      if (!algo.ok()) return algo.status();
      return std::unique_ptr<Case>(
          std::make_unique<AllreduceCase>(*std::move(algo), count, rank, world, index));
    }
    case BenchOp::kBroadcast:
      return std::unique_ptr<Case>(std::make_unique<BroadcastCase>(
          transport_, count, allreduce_options_.segment_bytes, timeout_, env_));
    case BenchOp::kPushPull:
      return MakePushPullCase(index, count);
  }
  return absl::InvalidArgumentError("bench.op: unknown op");
}

// The vector of `count` floats laid out over the job's shards as a training
// job lays out one bucket (common/ps_layout.h: partitions of at most the
// shards' partition_bytes, round-robin), so that the bench measures the data
// path that training uses and no message exceeds one partition. Partition p
// is keyed "JOB/b<index>p<p>" (under the job's prefix, so that the shards
// drop it with the job).
absl::StatusOr<std::unique_ptr<BenchRunner::Case>> BenchRunner::MakePushPullCase(
    int index, size_t count) {
  const int shards = static_cast<int>(job_.ps_shards.size());
  if (shards < 1) {
    return absl::FailedPreconditionError(
        "pushpull bench without parameter-server shards in the assignment");
  }
  // A size the job names, else the size a training job of `count` floats
  // on these hosts would get: each bench size is cut as such a model.
  const PsLayout layout =
      MakeJobPsLayout(job_, {Range{0, count}}, OnOneHost(job_.peer_addresses));
  std::vector<PsPartitionRef> partitions =
      MakePsPartitionRefs(job_.job_id, job_.ps_shards, layout);
  for (size_t i = 0; i < partitions.size(); ++i) {
    partitions[i].key =
        absl::StrCat(job_.job_id, "/b", index, "p", layout.partitions[i].index);
  }
  const int n = static_cast<int>(partitions.size());
  auto client = std::make_unique<PsClient>(transport_->rank(), PsCredentialsOf(job_),
                                           std::move(partitions), WireDtype::kFp32,
                                           /*stall=*/nullptr, env_);
  return std::unique_ptr<Case>(
      std::make_unique<PushPullCase>(std::move(client), n, count, transport_->rank(),
                                     transport_->size(), timeout_, env_));
}

// Steps 2a-2c of Run for one size.
absl::StatusOr<BenchRankRow> BenchRunner::RunSize(int index, int64_t bytes) {
  absl::StatusOr<std::unique_ptr<Case>> made = MakeCase(index, bytes);
  if (!made.ok()) return made.status();
  const std::unique_ptr<Case> c = *std::move(made);
  absl::Status st = WatchPs(c.get());
  if (st.ok()) st = c->Prepare(Deadline());
  BenchRankRow row;
  row.bytes = bytes;
  row.algorithm = c->algorithm();
  row.ok = true;
  const BenchOptions& bench = job_.bench;
  for (int w = 0; st.ok() && w < bench.warmup; ++w) {
    c->Fill();
    st = c->Run(NextStep());
  }
  for (int t = 0; st.ok() && t < bench.iters; ++t) {
    c->Fill();
    st = Barrier();
    if (!st.ok()) break;
    const absl::Time t0 = env_->NowMonotonic();
    st = c->Run(NextStep());
    const double seconds = SecondsSince(env_, t0);
    if (!st.ok()) break;
    row.iteration_seconds.push_back(seconds);
    const std::string bad = c->Verify();
    if (!bad.empty() && row.ok) {
      row.ok = false;
      row.error = absl::StrCat("iteration ", t, ": ", bad);
    }
  }
  ForgetPs();
  if (!st.ok()) return st;
  return row;
}

// Makes Abort reach the PS client of `c` (none for other ops). The abort
// status when Abort already ran.
absl::Status BenchRunner::WatchPs(Case* c) {
  auto* pushpull = dynamic_cast<PushPullCase*>(c);
  absl::MutexLock lock(&mu_);
  ps_ = pushpull != nullptr ? pushpull->client() : nullptr;
  if (!aborted_.ok() && ps_ != nullptr) ps_->Abort(aborted_);
  return aborted_;
}

void BenchRunner::ForgetPs() {
  absl::MutexLock lock(&mu_);
  ps_ = nullptr;
}

}  // namespace gradsync
