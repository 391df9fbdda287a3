// `gradsync local`: a server, PS shards and workers as processes on
// loopback (LocalCluster), one job or, with --compare, the job under each
// strategy-mode pair, then the results; everything is shut down at the end.
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/cli.h"
#include "client/local_cluster.h"
#include "client/report.h"
#include "common/grpc/security.h"
#include "common/ps_layout.h"
#include "common/spec/job_spec.h"
#include "common/spec/model_spec.h"

namespace gradsync {
namespace {

using Pairs = std::vector<std::pair<v1::Strategy, v1::SyncMode>>;

// --autotune's trials: runs per algorithm, and steps per run: 60, fewer
// for models over 1 M parameters (down to 10 at 6 M and over), since their
// steps take longer (on 2 CPU cores a step of mlp:784-4096-4096-10 takes
// about half a second).
constexpr int kAutotunePasses = 2;
constexpr int64_t kAutotuneMaxSteps = 60;
constexpr int64_t kAutotuneMinSteps = 10;
constexpr int64_t kAutotuneStepParams = 60'000'000;  // steps x parameters

int64_t AutotuneSteps(const v1::JobSpec& spec) {
  absl::StatusOr<MlpSpec> model =
      ParseModelSpec(spec.model().empty() ? kDefaultModel : spec.model());
  const int64_t params = model.ok() ? static_cast<int64_t>(NumParams(*model)) : 1;
  return std::clamp(kAutotuneStepParams / std::max<int64_t>(params, 1), kAutotuneMinSteps,
                    kAutotuneMaxSteps);
}

// --compare: the --pairs list; else the one --strategy/--mode pair. Dies (2)
// naming the flag that does not parse.
Pairs PairsFromOptions(const CliOptions& o) {
  Pairs pairs;
  if (!o.compare) {
    pairs.emplace_back(EnumFlag(ParseStrategy(o.strategy)),
                       EnumFlag(ParseSyncMode(o.mode)));
    return pairs;
  }
  for (absl::string_view p : absl::StrSplit(o.pairs, ',', absl::SkipEmpty())) {
    std::vector<std::string> sm = absl::StrSplit(p, '-');
    absl::StatusOr<v1::Strategy> strategy =
        sm.size() == 2 ? ParseStrategy(sm[0]) : absl::InvalidArgumentError("");
    absl::StatusOr<v1::SyncMode> mode =
        sm.size() == 2 ? ParseSyncMode(sm[1]) : absl::InvalidArgumentError("");
    if (!strategy.ok() || !mode.ok()) {
      Die(absl::StrCat("--pairs: '", p, "' is not STRATEGY-MODE (e.g. allreduce-async)"),
          2);
    }
    pairs.emplace_back(*strategy, *mode);
  }
  if (pairs.empty()) Die("--pairs is empty", 2);
  return pairs;
}

std::string MakeLogDir(const std::string& dir) {
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) Die(absl::StrCat("cannot create --log_dir ", dir, ": ", ec.message()));
    return dir;
  }
  char tmpl[] = "/tmp/gradsync-local-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("cannot create a log directory in /tmp");
  return tmpl;
}

// The cluster's settings; validates the locally-checkable flags before any
// process starts, and makes the log directory.
LocalClusterOptions ClusterOptions(const CliOptions& cli,
                                   const Interruption& interruption) {
  if (cli.workers < 1 || cli.workers > 64) {
    Die("--workers must be between 1 and 64 for a local cluster", 2);
  }
  if (cli.ps_shards < 1 || cli.ps_shards > 16) {
    Die("--ps_shards must be between 1 and 16 for a local cluster", 2);
  }
  if (cli.ps_inline_bytes >= 0) {  // < 0: the shards' default
    absl::Status st = CheckPsInlineBytes(cli.ps_inline_bytes);
    if (!st.ok()) Die(std::string(st.message()), 2);
  }
  if (!(cli.slow_worker >= 1 && cli.slow_worker <= 100)) {
    Die("--slow_worker must be from 1 (none) to 100", 2);
  }
  LocalClusterOptions o;
  o.workers = cli.workers;
  for (const std::string& f : cli.worker_flags) {
    if (!absl::StartsWith(f, "--")) {
      Die(absl::StrCat("--worker_flags takes flags (--name=value), got '", f, "'"), 2);
    }
    o.worker_flags.push_back(f);
  }
  if (cli.slow_worker > 1) {
    o.flags_of_worker.resize(cli.workers);
    o.flags_of_worker.back() = {absl::StrCat("--compute_slowdown=", cli.slow_worker)};
  }
  o.ps_shards = cli.ps_shards;
  o.bin_dir = SelfDir();
  o.log_dir = MakeLogDir(cli.log_dir);
  o.data_dir = cli.data_dir;
  // tensors-on-workers: the local workers are the user's own processes and
  // read the file where the user named it (workers refuse a file outside
  // their allowed directories).
  if (cli.spec) {
    const std::string dataset = cli.spec().dataset();
    if (IsWorkerTensorData(dataset)) {
      // The client form names the path alone; the wire form, hash and path.
      absl::StatusOr<WorkerTensorData> wire = WorkerTensorDataOf(dataset);
      const std::string path =
          wire.ok() ? wire->path : dataset.substr(std::strlen(kWorkerTensorsPrefix));
      const std::string dir = std::filesystem::path(path).parent_path().string();
      if (!dir.empty()) o.allowed_data_dirs.push_back(dir);
    }
  }
  o.tuning_file = cli.tuning_file;
  o.log_level = cli.log_level;
  o.heartbeat_timeout = cli.heartbeat_timeout;
  o.ps_inline_bytes = cli.ps_inline_bytes;
  o.interrupted = interruption.flag();
  o.tls_dir = cli.tls_dir;
  o.dashboard_listen = cli.dashboard;
  return o;
}

// One compared pair's strategy and mode. --weight_prediction=on is for the
// ring async pairs; the others get auto (off) rather than a refusal.
void SetPair(v1::Strategy strategy, v1::SyncMode mode, v1::JobSpec* spec) {
  spec->set_strategy(strategy);
  spec->set_mode(mode);
  if (strategy != v1::STRATEGY_ALLREDUCE || mode != v1::SYNC_MODE_ASYNC) {
    if (spec->weight_prediction() == v1::WEIGHT_PREDICTION_ON) {
      spec->set_weight_prediction(v1::WEIGHT_PREDICTION_UNSPECIFIED);
    }
  }
}

// Workers load a dataset on their first job and keep it (WorkerDaemon::
// LoadData), so without this the first compared job alone would pay for the
// load in its wall time. One step of the first pair, without checkpoints,
// resume or trace; 1 when it does not succeed (the comparison still runs).
int WarmUp(v1::Coordinator::Stub* stub, const CliOptions& cli,
           const std::pair<v1::Strategy, v1::SyncMode>& pair,
           Interruption* interruption) {
  v1::JobSpec spec = cli.spec();
  spec.set_name("warm-up");
  SetPair(pair.first, pair.second, &spec);
  spec.set_steps(1);
  spec.set_checkpoint_every(0);
  spec.clear_resume_from();
  spec.set_elastic(false);
  spec.set_min_workers(0);
  spec.set_elastic_wait_ms(0);
  spec.set_trace(false);
  std::printf(
      "warm-up: a one-step job loads the dataset into every worker "
      "(not in the table; --compare_warmup=false skips it)\n");
  std::fflush(stdout);
  v1::Job job;
  if (SubmitAndWatch(stub, spec, true, cli, interruption, &job) != 0) {
    if (!interruption->interrupted()) {
      std::printf("warm-up job %s did not succeed; comparing anyway\n", job.id().c_str());
    }
    return 1;
  }
  return 0;
}

// --autotune: whether any of `pairs` runs a ring job that lets the table
// choose, on 2 or more workers, with no table of its own (--tuning_file).
bool WantsAutotune(const CliOptions& cli, const v1::JobSpec& spec, const Pairs& pairs) {
  if (!cli.autotune || spec.workers() < 2 || !spec.tuning_table().empty()) {
    return false;
  }
  if (spec.algorithm() != v1::ALGORITHM_AUTO &&
      spec.algorithm() != v1::ALGORITHM_UNSPECIFIED) {
    return false;
  }
  for (const auto& [strategy, mode] : pairs) {
    if (strategy == v1::STRATEGY_ALLREDUCE) return true;
  }
  return false;
}

// Runs the trials of --autotune (AutotuneSteps-step allreduce-sync runs of the
// job, one per algorithm and pass) and returns the tuning table that makes
// every bucket run the algorithm with the least communication per step,
// summed over the passes; "" when a trial does not succeed (a line says so;
// the jobs then use the workers' table). The passes run ring-hd-rd, then
// rd-hd-ring, so that a machine whose load drifts favours no algorithm by
// its place in the order.
std::string Autotune(v1::Coordinator::Stub* stub, const CliOptions& cli,
                     const v1::JobSpec& spec, Interruption* interruption) {
  const std::vector<v1::Algorithm> order = {v1::ALGORITHM_RING,
                                            v1::ALGORITHM_HALVING_DOUBLING,
                                            v1::ALGORITHM_RECURSIVE_DOUBLING};
  const int64_t steps = AutotuneSteps(spec);
  std::printf(
      "autotune: %lld-step allreduce-sync trials with ring, hd and rd "
      "allreduce, %d passes (--autotune=false skips them)\n",
      static_cast<long long>(steps), kAutotunePasses);
  std::fflush(stdout);
  CliOptions quiet = cli;
  quiet.quiet = true;
  std::map<v1::Algorithm, double> per_step;  // comm seconds per step, summed
  const absl::Time began = absl::Now();
  for (int pass = 0; pass < kAutotunePasses; ++pass) {
    for (size_t i = 0; i < order.size(); ++i) {
      const v1::Algorithm algorithm = order[pass % 2 == 0 ? i : order.size() - 1 - i];
      v1::JobSpec s = spec;
      s.set_name(absl::StrCat("autotune ", AlgorithmName(algorithm)));
      SetPair(v1::STRATEGY_ALLREDUCE, v1::SYNC_MODE_SYNC, &s);
      s.clear_staleness();
      s.set_algorithm(algorithm);
      s.set_steps(steps);
      s.set_checkpoint_every(0);
      s.clear_resume_from();
      s.set_elastic(false);
      s.set_min_workers(0);
      s.set_elastic_wait_ms(0);
      s.set_trace(false);
      v1::Job job;
      const int rc = SubmitAndWatch(stub, s, true, quiet, interruption, &job);
      if (interruption->interrupted()) return "";
      if (rc != 0 || job.result().steps() <= 0) {
        std::printf(
            "autotune: the %s trial %s did not succeed (%s); allreduce jobs "
            "use the workers' table\n",
            AlgorithmName(algorithm).c_str(), job.id().c_str(),
            JobErrorText(job).c_str());
        return "";
      }
      per_step[algorithm] +=
          job.result().comm_seconds() / static_cast<double>(job.result().steps());
    }
  }
  v1::Algorithm best = order.front();
  std::string figures;
  for (v1::Algorithm algorithm : order) {
    const double ms = 1e3 * per_step[algorithm] / kAutotunePasses;
    absl::StrAppend(&figures, figures.empty() ? "" : ", ", AlgorithmName(algorithm),
                    absl::StrFormat(" %.2f ms", ms));
    if (per_step[algorithm] < per_step[best]) best = algorithm;
  }
  std::printf(
      "autotune: %.1f s; communication per step %s; allreduce jobs with "
      "--algorithm=auto run %s\n",
      absl::ToDoubleSeconds(absl::Now() - began), figures.c_str(),
      AlgorithmName(best).c_str());
  std::fflush(stdout);
  return absl::StrCat(
      "# gradsync local --autotune: least communication per "
      "step in ",
      steps, "-step allreduce-sync trials (", figures, ")\n", spec.workers(), " inf ",
      AlgorithmName(best), "\n");
}

// Watches the cluster's daemons while `local` runs jobs on them: one that
// exits (killed, crashed) stops the command naming it, so that no job waits
// for a worker that is gone (a job queued for 4 workers on a cluster of 3
// would wait forever). Polls every kPeriod until destroyed.
class ClusterWatchdog {
 public:
  static constexpr absl::Duration kPeriod = absl::Milliseconds(200);

  // `servers_only`: workers may die (an elastic job goes on without them).
  ClusterWatchdog(LocalCluster* cluster, Interruption* interruption, bool servers_only)
      : cluster_(cluster),
        interruption_(interruption),
        servers_only_(servers_only),
        thread_([this] { Run(); }) {}
  ~ClusterWatchdog() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }
  ClusterWatchdog(const ClusterWatchdog&) = delete;
  ClusterWatchdog& operator=(const ClusterWatchdog&) = delete;

  // Checks now, and again until `grace` has passed while all live: a job
  // that failed because a worker was killed can end before the kernel has
  // made the process a zombie that waitpid sees. The dead daemon's status
  // with its log's last lines; OK while none died.
  absl::Status CheckNow(absl::Duration grace) {
    const absl::Time until = absl::Now() + grace;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        absl::Status st = CheckLocked();
        if (!st.ok() || absl::Now() >= until) return st;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

 private:
  void Run() {
    absl::MutexLock lock(&mu_);
    while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), kPeriod)) {
      if (!CheckLocked().ok()) return;
    }
  }

  absl::Status CheckLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!lost_.ok()) return lost_;
    absl::Status alive = cluster_->CheckAlive(servers_only_);
    if (alive.ok()) return alive;
    lost_ = alive;
    const std::string first(alive.message().substr(0, alive.message().find('\n')));
    interruption_->Stop(
        absl::StrCat("a daemon of the local cluster is gone (", first, ")"));
    return lost_;
  }

  LocalCluster* const cluster_;
  Interruption* const interruption_;
  const bool servers_only_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status lost_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace

int LocalCommand(const CliOptions& cli, Interruption* interruption) {
  const Pairs pairs = PairsFromOptions(cli);
  const LocalClusterOptions o = ClusterOptions(cli, *interruption);
  const absl::Time started = absl::Now();
  std::printf("starting 1 server, %d PS shard(s), %d workers (logs in %s)\n", o.ps_shards,
              o.workers, o.log_dir.c_str());
  std::fflush(stdout);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(o);
  if (!cluster.ok()) {
    Die(std::string(cluster.status().message()), interruption->interrupted() ? 130 : 1);
  }
  SetClusterSecurity((*cluster)->client_security());  // its random token
  const absl::Time cluster_up = absl::Now();
  if (!(*cluster)->server().dashboard.empty()) {
    std::printf("dashboard: http://%s/?token=%s (while the jobs run)\n",
                (*cluster)->server().dashboard.c_str(), (*cluster)->Token().c_str());
    std::fflush(stdout);
  }
  auto stub = Connect((*cluster)->coordinator());
  auto watchdog = std::make_unique<ClusterWatchdog>(cluster->get(), interruption,
                                                    cli.spec().elastic());
  std::vector<v1::Job> jobs;
  std::vector<JobTimeline> timelines;
  int rc = 0;
  if (cli.compare && cli.compare_warmup && !interruption->interrupted()) {
    rc = WarmUp(stub.get(), cli, pairs.front(), interruption);
  }
  std::string tuned;
  if (const v1::JobSpec spec = cli.spec();
      WantsAutotune(cli, spec, pairs) && !interruption->interrupted()) {
    tuned = Autotune(stub.get(), cli, spec, interruption);
  }
  for (const auto& [strategy, mode] : pairs) {
    if (interruption->interrupted()) break;
    v1::JobSpec spec = cli.spec();
    SetPair(strategy, mode, &spec);
    if (strategy == v1::STRATEGY_ALLREDUCE && !tuned.empty()) {
      spec.set_tuning_table(tuned);
    }
    v1::Job job;
    JobTimeline timeline;
    if (SubmitAndWatch(stub.get(), spec, true, cli, interruption, &job, &timeline) != 0) {
      rc = 1;
    }
    jobs.push_back(job);
    timelines.push_back(std::move(timeline));
    if (!cli.compare) PrintJob(job);
  }
  // A failed job may have lost a worker that the next poll would see.
  const absl::Status lost =
      watchdog->CheckNow(rc != 0 ? absl::Seconds(1) : absl::ZeroDuration());
  watchdog.reset();
  // Our channel first: a gRPC server stopping waits (up to its 2 s grace)
  // for every client connection to close, and an idle channel does not read
  // the server's GOAWAY, so it would hold the coordinator those 2 s.
  stub.reset();
  (*cluster)->Shutdown();
  if (!lost.ok()) {
    std::fprintf(stderr,
                 "gradsync: local: %s\nThe jobs need every worker of the local cluster; "
                 "stopped.\n",
                 std::string(lost.message()).c_str());
    return 1;
  }
  if (interruption->interrupted()) return 130;
  if (cli.compare) std::printf("\n%s", CompareTable(jobs).c_str());
  WriteResults(cli, jobs, cli.compare, &timelines);
  WriteTraces(cli, jobs);
  // Where the time went, as the README's set-up scripts say for theirs.
  std::printf("local: starting the cluster took %.1f s, the jobs %.1f s\n",
              absl::ToDoubleSeconds(cluster_up - started),
              absl::ToDoubleSeconds(absl::Now() - cluster_up));
  return rc;
}

}  // namespace gradsync
