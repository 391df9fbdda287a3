// Elastic jobs on real daemons on loopback (issue 36's targets), each figure
// against a baseline measured in the same run:
//  1. recovery: a worker of an N-rank elastic job is killed (kill -9) mid
//     epoch; the time from the kill to the first report of the next
//     generation (its ranks loaded the checkpoint and train), and the steps
//     redone, over --trials trials (median, max); the killed worker is
//     started again between trials;
//  2. churn: an --epochs-epoch elastic job with one worker killed in every
//     epoch (and started again at once, so it is taken back in at a later
//     commit) against the same job uninterrupted: test accuracy and wall
//     time side by side.
// Prints one line per measurement and a summary; --results=FILE writes JSON.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/local_cluster.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/security.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

ABSL_FLAG(std::string, bin_dir, "build/bin",
          "Where gradsync-server and gradsync-worker are.");
ABSL_FLAG(int, workers, 4, "Ranks of the job (N); the cluster has this many workers.");
ABSL_FLAG(int, trials, 5, "Recovery trials (part 1).");
ABSL_FLAG(int, epochs, 5, "Epochs of the churn job (part 2); 0 skips part 2.");
ABSL_FLAG(int, checkpoint_every, 50, "The jobs' commit interval K.");
ABSL_FLAG(std::string, strategy, "ring", "ps or ring.");
ABSL_FLAG(std::string, mode, "sync", "sync or async.");
ABSL_FLAG(int, staleness, -1, "ps async: the SSP bound (-1: unbounded ASGD).");
ABSL_FLAG(std::string, results, "", "Write the figures as JSON here.");

namespace gradsync {
namespace {

class Bench {
 public:
  explicit Bench(std::unique_ptr<LocalCluster> c) : c_(std::move(c)) {
    stub_ = v1::Coordinator::NewStub(MakeSecureChannel(
        c_->coordinator(), DefaultChannelArgs(), c_->client_security()));
  }

  v1::JobSpec Spec(int epochs) const {
    v1::JobSpec s;
    s.set_strategy(absl::GetFlag(FLAGS_strategy) == "ps" ? v1::STRATEGY_PS
                                                         : v1::STRATEGY_ALLREDUCE);
    s.set_mode(absl::GetFlag(FLAGS_mode) == "async" ? v1::SYNC_MODE_ASYNC
                                                    : v1::SYNC_MODE_SYNC);
    s.set_workers(absl::GetFlag(FLAGS_workers));
    s.set_batch_size(32);
    s.set_optimizer(v1::OPTIMIZER_ADAM);
    s.set_lr(0.001f);
    s.set_epochs(epochs);
    s.set_seed(11);
    if (absl::GetFlag(FLAGS_staleness) >= 0)
      s.set_staleness(absl::GetFlag(FLAGS_staleness));
    s.set_elastic(true);
    s.set_min_workers(1);
    s.set_checkpoint_every(absl::GetFlag(FLAGS_checkpoint_every));
    return s;
  }

  std::string Submit(const v1::JobSpec& spec) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    v1::Job job;
    grpc::Status st = stub_->SubmitJob(&ctx, req, &job);
    if (!st.ok()) Die(absl::StrCat("submit: ", st.error_message()));
    return job.id();
  }

  v1::Job Get(const std::string& id) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
    v1::GetJobRequest req;
    req.set_id(id);
    v1::Job job;
    grpc::Status st = stub_->GetJob(&ctx, req, &job);
    if (!st.ok()) Die(absl::StrCat("get: ", st.error_message()));
    return job;
  }

  // Polls every 5 ms until pred or `limit`; dies on timeout.
  template <typename Pred>
  v1::Job WaitFor(const std::string& id, absl::Duration limit, Pred pred) {
    const absl::Time until = absl::Now() + limit;
    while (true) {
      v1::Job j = Get(id);
      if (pred(j)) return j;
      if (absl::Now() > until) Die(absl::StrCat("job ", id, " timed out: ", j.error()));
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  static bool Ended(const v1::Job& j) {
    return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED ||
           j.state() == v1::CANCELLED;
  }

  int WorkerIndex(const std::string& id) const { return std::stoi(id.substr(1)); }

  LocalCluster* cluster() { return c_.get(); }

  [[noreturn]] static void Die(const std::string& why) {
    std::fprintf(stderr, "elastic_bench: %s\n", why.c_str());
    std::exit(1);
  }

 private:
  std::unique_ptr<LocalCluster> c_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace
}  // namespace gradsync

int main(int argc, char** argv) {
  using namespace gradsync;  // NOLINT(build/namespaces): a benchmark's main
  absl::SetProgramUsageMessage(
      "elastic_bench: recovery time and churn cost of elastic jobs");
  absl::ParseCommandLine(argc, argv);
  LocalClusterOptions o;
  o.bin_dir = absl::GetFlag(FLAGS_bin_dir);
  o.workers = absl::GetFlag(FLAGS_workers);
  char dir[] = "/tmp/gradsync-elastic-bench-XXXXXX";
  if (mkdtemp(dir) == nullptr) Bench::Die("mkdtemp failed");
  o.log_dir = dir;
  absl::StatusOr<std::unique_ptr<LocalCluster>> started = LocalCluster::Start(o);
  if (!started.ok()) Bench::Die(started.status().ToString());
  Bench b(*std::move(started));
  nlohmann::json out;
  out["strategy"] = absl::GetFlag(FLAGS_strategy);
  out["mode"] = absl::GetFlag(FLAGS_mode);
  out["workers"] = absl::GetFlag(FLAGS_workers);
  out["checkpoint_every"] = absl::GetFlag(FLAGS_checkpoint_every);
  out["staleness"] = absl::GetFlag(FLAGS_staleness);
  std::mt19937 rng(12345);

  // 1. recovery
  std::vector<double> recover, reform, redone;
  for (int t = 0; t < absl::GetFlag(FLAGS_trials); ++t) {
    const std::string id = b.Submit(b.Spec(3));
    const int64_t at = std::uniform_int_distribution<int64_t>(120, 400)(rng);
    v1::Job j = b.WaitFor(id, absl::Seconds(120), [&](const v1::Job& x) {
      return Bench::Ended(x) || (x.step() >= at && x.workers_size() > 0);
    });
    if (Bench::Ended(j))
      Bench::Die(absl::StrCat("job ended before the kill: ", j.error()));
    const std::string victim =
        j.workers(std::uniform_int_distribution<int>(0, j.workers_size() - 1)(rng));
    const absl::Time killed = absl::Now();
    b.cluster()->KillWorker(b.WorkerIndex(victim));
    j = b.WaitFor(id, absl::Seconds(60), [](const v1::Job& x) {
      return Bench::Ended(x) ||
             (x.generations_size() >= 2 && x.generations(1).committed());
    });
    const double secs = absl::ToDoubleSeconds(absl::Now() - killed);
    if (Bench::Ended(j)) Bench::Die(absl::StrCat("job ended instead: ", j.error()));
    recover.push_back(secs);
    reform.push_back(j.generations(1).reform_seconds());
    redone.push_back(static_cast<double>(j.generations(1).steps_redone()));
    std::printf(
        "recovery %d: killed %s at step >= %ld; next generation trained %.3f s "
        "later (re-formation %.3f s), %ld steps redone\n",
        t + 1, victim.c_str(), static_cast<long>(at), secs, reform.back(),
        static_cast<long>(redone.back()));
    std::fflush(stdout);
    // The job runs to its end; the worker comes back for the next trial.
    b.WaitFor(id, absl::Seconds(300), Bench::Ended);
    if (absl::Status st = b.cluster()->RestartWorker(b.WorkerIndex(victim)); !st.ok()) {
      Bench::Die(st.ToString());
    }
  }
  out["recovery_seconds"] = recover;
  out["reform_seconds"] = reform;
  out["steps_redone"] = redone;
  out["recovery_median_seconds"] = Median(recover);
  std::printf(
      "recovery: median %.3f s, max %.3f s from kill -9 to the next generation's "
      "first report; steps redone max %.0f (K = %d)\n",
      Median(recover), *std::max_element(recover.begin(), recover.end()),
      *std::max_element(redone.begin(), redone.end()),
      absl::GetFlag(FLAGS_checkpoint_every));

  // 2. churn
  const int epochs = absl::GetFlag(FLAGS_epochs);
  if (epochs > 0) {
    const v1::Job whole =
        b.WaitFor(b.Submit(b.Spec(epochs)), absl::Seconds(900), Bench::Ended);
    if (whole.state() != v1::SUCCEEDED) Bench::Die(whole.error());
    const std::string id = b.Submit(b.Spec(epochs));
    int64_t per_epoch = 0;
    for (int e = 0; e + 1 < epochs; ++e) {
      v1::Job j = b.WaitFor(id, absl::Seconds(300), [&](const v1::Job& x) {
        if (per_epoch == 0 && x.total_steps() > 0) per_epoch = x.total_steps() / epochs;
        return Bench::Ended(x) || (per_epoch > 0 && x.workers_size() > 1 &&
                                   x.step() >= e * per_epoch + per_epoch / 2);
      });
      if (Bench::Ended(j)) break;
      const std::string victim = j.workers(j.workers_size() - 1);
      b.cluster()->KillWorker(b.WorkerIndex(victim));
      if (absl::Status st = b.cluster()->RestartWorker(b.WorkerIndex(victim)); !st.ok()) {
        Bench::Die(st.ToString());
      }
      std::printf("churn: killed %s in epoch %d and started it again\n", victim.c_str(),
                  e + 1);
      std::fflush(stdout);
    }
    const v1::Job cut = b.WaitFor(id, absl::Seconds(900), Bench::Ended);
    if (cut.state() != v1::SUCCEEDED) Bench::Die(cut.error());
    const double ratio = cut.result().wall_seconds() / whole.result().wall_seconds();
    std::printf(
        "churn: %d epochs, uninterrupted accuracy %.4f in %.2f s; with a kill every "
        "epoch %.4f in %.2f s (%d generations): accuracy %+.4f, wall x%.2f\n",
        epochs, whole.result().test_accuracy(), whole.result().wall_seconds(),
        cut.result().test_accuracy(), cut.result().wall_seconds(), cut.generations_size(),
        cut.result().test_accuracy() - whole.result().test_accuracy(), ratio);
    out["churn"] = {{"epochs", epochs},
                    {"uninterrupted_accuracy", whole.result().test_accuracy()},
                    {"uninterrupted_wall_seconds", whole.result().wall_seconds()},
                    {"elastic_accuracy", cut.result().test_accuracy()},
                    {"elastic_wall_seconds", cut.result().wall_seconds()},
                    {"generations", cut.generations_size()},
                    {"wall_ratio", ratio}};
  }
  if (const std::string path = absl::GetFlag(FLAGS_results); !path.empty()) {
    std::ofstream(path) << out.dump(2) << "\n";
    std::printf("results written to %s\n", path.c_str());
  }
  b.cluster()->Shutdown();
  return 0;
}
