// gradsync: submit, watch and compare training jobs; run a local cluster.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "client/bench_command.h"
#include "client/local_cluster.h"
#include "client/report.h"
#include "client/timeline.h"
#include "client/trace_json.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/security_flags.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051",
          "submit/watch/status/list/cancel: HOST:PORT of the coordinator.");
ABSL_FLAG(std::string, strategy, "ring", "Gradient synchronisation: ps or ring.");
ABSL_FLAG(std::string, mode, "sync",
          "sync (BSP / synchronous allreduce) or async (ASGD/SSP for ps, "
          "bounded-staleness pipelining for ring).");
ABSL_FLAG(int, staleness, -1,
          "Async staleness bound. ps: SSP bound s (a worker may run at most s "
          "steps ahead of the slowest; -1 = unbounded). ring: allreduces in "
          "flight behind compute (-1 = default 1).");
ABSL_FLAG(int, workers, 4, "Number of workers (world size).");
ABSL_FLAG(int, ps_shards, 1,
          "Parameter-server shards for ps jobs; the flat parameter vector is "
          "split evenly by bytes. `local` starts the extra shard servers.");
ABSL_FLAG(int, epochs, 1, "Epochs over the training set.");
ABSL_FLAG(int64_t, steps, 0, "Train this many steps instead (overrides --epochs).");
ABSL_FLAG(int, batch_size, 32, "Batch size per worker (global batch = workers x this).");
ABSL_FLAG(double, lr, 0.001,
          "Learning rate (default suits adam; for sgd with momentum try 0.01).");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum (0 = plain SGD).");
ABSL_FLAG(std::string, optimizer, "adam",
          "adam, or sgd (with --momentum). Adam is the default because it stays "
          "stable under the stale gradients of the async modes.");
ABSL_FLAG(std::string, model, "mlp:784-256-128-10",
          "Model: mlp:IN-H1-...-OUT (input 784 and output 10 for Fashion-MNIST).");
ABSL_FLAG(uint64_t, seed, 1, "Seed for initial parameters and data order.");
ABSL_FLAG(std::string, data_dir, "",
          "Fashion-MNIST directory with the *-idx*-ubyte.gz files (default: "
          "/usr/share/datasets/fashion-mnist).");
ABSL_FLAG(std::string, tls_dir, "",
          "local: run the cluster with mutual TLS, using DIR/ca.pem, cert.pem "
          "and key.pem as `bash deploy/make-dev-certs.sh DIR` writes them. "
          "(Other commands dial with --tls_cert/--tls_key/--tls_ca.)");
ABSL_FLAG(std::string, device, "cpu", "Worker compute device: cpu or cuda.");
ABSL_FLAG(bool, tf32, false, "device=cuda: allow TF32 tensor-core GEMMs (faster, ~1e-3 error).");
ABSL_FLAG(int64_t, bucket_bytes, 25 << 20,
          "device=cuda: gradient bucket size; buckets (last layers first) are "
          "synchronised while backward still runs.");
ABSL_FLAG(int64_t, chunk_bytes, 1 << 20, "Ring pipelining segment size in bytes.");
ABSL_FLAG(int, connections_per_peer, 1,
          "Ring: TCP connections to each neighbour, segments striped over "
          "them (1..8; more helps where one connection's transport work "
          "saturates a core).");
ABSL_FLAG(std::string, wire_dtype, "fp32",
          "Element format of gradients and parameters on the wire, both "
          "strategies: fp32, bf16 or fp16 (16-bit halves the bytes; values "
          "are rounded to nearest even when sent, sums and optimizer state "
          "stay float32; see the README for the accuracy cost).");
ABSL_FLAG(std::string, tuning_file, "",
          "local, local bench: the workers' allreduce tuning table for "
          "--algorithm=auto (lines 'WORLD MAX_BYTES ALGORITHM', as written "
          "by 'gradsync bench --tune=FILE'); default: the built-in table.");
ABSL_FLAG(std::string, algorithm, "auto",
          "Ring strategy: allreduce algorithm per gradient bucket: ring, hd "
          "(halving-doubling), tree (recursive doubling), hier (reduce in "
          "host groups, ring among group leaders, broadcast), or auto (the "
          "workers' tuning table chooses by world size and bucket bytes).");
ABSL_FLAG(std::string, groups, "",
          "--algorithm=hier: a host group id per rank, comma-separated (e.g. "
          "0,0,1,1), to try groups on one machine. Default: ranks whose peer "
          "addresses share a host form a group.");
ABSL_FLAG(int, step_timeout_ms, 30000,
          "Per-step communication timeout; a peer silent this long fails the job.");
ABSL_FLAG(int, stall_report_ms, 0,
          "A worker waiting this long for a peer or PS shard reports a stall "
          "(shown by status and watch); 0 = half of --step_timeout_ms.");
ABSL_FLAG(int64_t, train_limit, 0, "Use only the first N training samples (0 = all).");
ABSL_FLAG(std::string, name, "", "Free-text job name.");
ABSL_FLAG(int64_t, checkpoint_every, 0,
          "Checkpoint every K steps under the PS shards' --state_dir "
          "(ps sync: each slice after every K-th step; ps async: each slice "
          "when its slowest rank reaches a multiple of K; ring sync: rank 0 "
          "sends parameters + optimizer state to shard 0; 0 = off).");
ABSL_FLAG(std::string, resume, "",
          "submit: start a new job from the last checkpoint of this ended job "
          "(same spec; the other job flags are ignored).");
ABSL_FLAG(std::string, results, "",
          "Write the results JSON here (one job; with --compare {\"jobs\": [...]}).");
ABSL_FLAG(bool, trace, false,
          "Record a timeline of every rank (Chrome trace JSON, for Perfetto / "
          "chrome://tracing); with --wait / local it is written to --trace_file.");
ABSL_FLAG(std::string, trace_file, "",
          "--trace: the merged trace's path (default trace-<job id>.json; with "
          "several jobs, -<job id> is inserted before .json).");
ABSL_FLAG(bool, compare, false,
          "local: run the same job under each of --pairs and print a table.");
ABSL_FLAG(std::string, pairs, "ps-sync,ps-async,ring-sync,ring-async",
          "--compare: comma-separated strategy-mode pairs to run.");
ABSL_FLAG(std::string, log_dir, "",
          "local: directory for the daemons' logs (default: a new /tmp/gradsync-local-* "
          "directory, printed at start).");
ABSL_FLAG(std::string, log_level, "warn", "local: daemons' log level.");
ABSL_FLAG(bool, wait, false, "submit: watch the job until it ends.");
ABSL_FLAG(bool, json, false, "status/list: print JSON instead of text.");
ABSL_FLAG(bool, quiet, false, "Print no progress lines, only results.");
ABSL_FLAG(double, heartbeat_timeout, 6.0,
          "local: seconds without a heartbeat before a worker counts as dead.");

namespace gradsync {
namespace {

constexpr char kUsage[] = R"(gradsync COMMAND [flags]

Commands:
  local     start a server and --workers workers on loopback, run one job
            (or, with --compare, the job under several strategies), print
            results, shut everything down. Ctrl-C cancels and cleans up.
  submit    submit a job to --server; prints its id (--wait to watch it)
  bench     submit a bench job to --server: --op (allreduce, broadcast,
            pushpull) timed over --sizes on --workers workers, --iters timed
            runs after --warmup, every result verified; prints one row per
            size (time, algbw, busbw, the alpha-beta model, OK/FAILED);
            --results=FILE.json, --tune=FILE (ring/hd/tree, fastest per size)
  local bench   the same on a loopback cluster of its own
  watch ID  stream a job's progress until it ends
  status ID show one job
  list      show jobs and workers
  cancel ID cancel a queued or running job

Flags may be written --batch-size or --batch_size.
Every command that dials sends the cluster token from --token_file=PATH (or
$GRADSYNC_TOKEN; the file wins), with TLS when --tls_cert/--tls_key/--tls_ca
are given; `local` makes a random token of its own (see README, Security).
Examples:
  gradsync local --compare --workers 4 --epochs 1 --results=results.json
  gradsync submit --server=HOST:PORT --strategy=ps --mode=async --staleness=2 --wait
  gradsync submit --server=HOST:PORT --resume=j-1-7 --wait
)";

std::atomic<bool> g_interrupted{false};
absl::Mutex g_watch_mu;
grpc::ClientContext* g_watch_ctx ABSL_GUARDED_BY(g_watch_mu) = nullptr;

void Die(const std::string& msg, int code = 1) {
  std::cerr << "gradsync: " << msg << std::endl;
  std::exit(code);
}

std::unique_ptr<v1::Coordinator::Stub> Connect(const std::string& addr) {
  auto channel = MakeChannel(addr);
  absl::Status st =
      WaitForConnected(channel.get(), addr, absl::Now() + absl::Seconds(3));
  if (!st.ok()) {
    Die(absl::StrCat("cannot reach the coordinator at ", addr,
                     " (connection refused or timed out; is gradsync-server running?)"));
  }
  return v1::Coordinator::NewStub(channel);
}

std::string RpcError(const grpc::Status& st) {
  return absl::StrCat(absl::StatusCodeToString(
                          static_cast<absl::StatusCode>(st.error_code())),
                      ": ", st.error_message(),
                      st.error_code() == grpc::StatusCode::UNAUTHENTICATED
                          ? " (give the cluster's token: --token_file=PATH "
                            "or GRADSYNC_TOKEN)"
                          : "");
}

// The value of a text flag naming an enum; exits 2 naming the field when it
// is not one of the names.
template <typename E>
E EnumFlag(const absl::StatusOr<E>& parsed) {
  if (!parsed.ok()) Die(std::string(parsed.status().message()), 2);
  return *parsed;
}

v1::JobSpec SpecFromFlags() {
  v1::JobSpec s;
  s.set_name(absl::GetFlag(FLAGS_name));
  s.set_strategy(EnumFlag(ParseStrategy(absl::GetFlag(FLAGS_strategy))));
  s.set_mode(EnumFlag(ParseSyncMode(absl::GetFlag(FLAGS_mode))));
  if (absl::GetFlag(FLAGS_staleness) >= 0) s.set_staleness(absl::GetFlag(FLAGS_staleness));
  else if (absl::GetFlag(FLAGS_staleness) < -1) s.set_staleness(absl::GetFlag(FLAGS_staleness));
  s.set_workers(absl::GetFlag(FLAGS_workers));
  s.set_ps_shards(absl::GetFlag(FLAGS_ps_shards));
  s.set_epochs(absl::GetFlag(FLAGS_epochs));
  s.set_steps(absl::GetFlag(FLAGS_steps));
  s.set_batch_size(absl::GetFlag(FLAGS_batch_size));
  s.set_lr(static_cast<float>(absl::GetFlag(FLAGS_lr)));
  s.set_momentum(static_cast<float>(absl::GetFlag(FLAGS_momentum)));
  s.set_optimizer(EnumFlag(ParseOptimizer(absl::GetFlag(FLAGS_optimizer))));
  s.set_model(absl::GetFlag(FLAGS_model));
  s.set_seed(absl::GetFlag(FLAGS_seed));
  s.set_data_dir(absl::GetFlag(FLAGS_data_dir));
  s.set_device(EnumFlag(ParseDevice(absl::GetFlag(FLAGS_device))));
  s.set_chunk_bytes(absl::GetFlag(FLAGS_chunk_bytes));
  s.set_connections_per_peer(absl::GetFlag(FLAGS_connections_per_peer));
  s.set_algorithm(EnumFlag(ParseAlgorithm(absl::GetFlag(FLAGS_algorithm))));
  s.set_groups(absl::GetFlag(FLAGS_groups));
  s.set_wire_dtype(EnumFlag(ParseWireDtype(absl::GetFlag(FLAGS_wire_dtype))));
  s.set_bucket_bytes(absl::GetFlag(FLAGS_bucket_bytes));
  s.set_tf32(absl::GetFlag(FLAGS_tf32));
  s.set_step_timeout_ms(absl::GetFlag(FLAGS_step_timeout_ms));
  s.set_stall_report_ms(absl::GetFlag(FLAGS_stall_report_ms));
  s.set_train_limit(absl::GetFlag(FLAGS_train_limit));
  s.set_checkpoint_every(absl::GetFlag(FLAGS_checkpoint_every));
  s.set_trace(absl::GetFlag(FLAGS_trace));
  return s;
}

// submit --resume=ID: job ID's spec, resuming from its checkpoint.
v1::JobSpec ResumeSpec(v1::Coordinator::Stub* stub, const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
  v1::GetJobRequest req;
  req.set_id(id);
  v1::Job old;
  grpc::Status st = stub->GetJob(&ctx, req, &old);
  if (!st.ok()) Die(absl::StrCat("submit --resume: ", RpcError(st)), 2);
  v1::JobSpec spec = old.spec();
  spec.set_resume_from(id);
  return spec;
}

// Streams the job's events (into `timeline` too, when given); returns the
// final job (GetJob after the end).
v1::Job Watch(v1::Coordinator::Stub* stub, const std::string& id,
              const std::string& label, JobTimeline* timeline = nullptr) {
  const bool quiet = absl::GetFlag(FLAGS_quiet);
  const bool tty = isatty(1);
  grpc::ClientContext ctx;
  {
    absl::MutexLock lock(&g_watch_mu);
    g_watch_ctx = &ctx;
    // A Ctrl-C that came before the watch existed still ends it.
    if (g_interrupted) ctx.TryCancel();
  }
  v1::WatchJobRequest req;
  req.set_id(id);
  auto reader = stub->WatchJob(&ctx, req);
  v1::JobEvent ev;
  absl::Time last_line = absl::InfinitePast();
  bool pending_cr = false;
  while (reader->Read(&ev)) {
    if (timeline != nullptr) timeline->Add(ev, absl::Now());
    if (quiet) continue;
    std::string line = EventLine(ev, label);
    if (line.empty()) continue;
    if (ev.kind() == v1::JobEvent::PROGRESS) {
      if (ev.step() == 0) continue;
      if (tty) {
        std::printf("\r\033[K%s", line.c_str());
        std::fflush(stdout);
        pending_cr = true;
      } else if (absl::Now() - last_line > absl::Seconds(2)) {
        std::printf("%s\n", line.c_str());
        last_line = absl::Now();
      }
      continue;
    }
    if (pending_cr) std::printf("\r\033[K");
    pending_cr = false;
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  if (pending_cr) std::printf("\n");
  grpc::Status st = reader->Finish();
  {
    absl::MutexLock lock(&g_watch_mu);
    g_watch_ctx = nullptr;
  }
  if (g_interrupted) {
    grpc::ClientContext cctx;
    cctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(3)));
    v1::CancelJobRequest creq;
    creq.set_id(id);
    v1::Job j;
    stub->CancelJob(&cctx, creq, &j);
    std::cerr << "gradsync: interrupted; cancelled " << id << std::endl;
    return j;
  }
  if (!st.ok()) Die(absl::StrCat("watch ", id, ": ", RpcError(st)));
  grpc::ClientContext gctx;
  gctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
  v1::GetJobRequest greq;
  greq.set_id(id);
  v1::Job job;
  st = stub->GetJob(&gctx, greq, &job);
  if (!st.ok()) Die(absl::StrCat("status ", id, ": ", RpcError(st)));
  return job;
}

// `timelines`, when given, has one entry per job (in `jobs` order).
void WriteResults(const std::vector<v1::Job>& jobs, bool as_list,
                  const std::vector<JobTimeline>* timelines = nullptr) {
  const std::string path = absl::GetFlag(FLAGS_results);
  if (path.empty()) return;
  std::vector<nlohmann::json> each;
  for (size_t i = 0; i < jobs.size(); ++i) {
    each.push_back(JobToJson(jobs[i]));
    if (timelines != nullptr) each.back()["timeline"] = (*timelines)[i].ToJson();
  }
  nlohmann::json j = as_list ? nlohmann::json{{"jobs", each}} : each.front();
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) Die(absl::StrCat("cannot write results to ", path));
  std::printf("results written to %s\n", path.c_str());
}

// --trace: writes each traced job's merged timeline (trace_json.h).
void WriteTraces(const std::vector<v1::Job>& jobs) {
  if (!absl::GetFlag(FLAGS_trace)) return;
  const std::string flag = absl::GetFlag(FLAGS_trace_file);
  for (const v1::Job& job : jobs) {
    if (job.state() != v1::SUCCEEDED) continue;
    const std::string path = TracePath(flag, job.id(), jobs.size() > 1);
    absl::Status st = WriteTrace(job, path);
    if (!st.ok()) Die(std::string(st.message()));
    std::printf("trace written to %s\n", path.c_str());
  }
}

void PrintJob(const v1::Job& job) {
  const v1::JobResult& r = job.result();
  std::printf("%s  %s  %s  workers=%d  state=%s%s\n", job.id().c_str(),
              StrategyLabel(job.spec()).c_str(), job.spec().model().c_str(),
              job.spec().workers(), v1::JobState_Name(job.state()).c_str(),
              job.error().empty() && job.error_code() == 0
                  ? ""
                  : absl::StrCat("  error: ", JobErrorText(job)).c_str());
  if (job.state() == v1::SUCCEEDED) {
    std::printf(
        "  test_accuracy=%.4f final_train_loss=%.4f wall=%.2fs samples/s=%.0f "
        "comm=%.2fs\n",
        r.test_accuracy(), r.final_train_loss(), r.wall_seconds(),
        r.samples_per_second(), r.comm_seconds());
  } else if (job.state() == v1::RUNNING) {
    std::printf("  step %ld/%ld\n", static_cast<long>(job.step()),
                static_cast<long>(job.total_steps()));
  }
  for (const std::string& stall : job.stalls()) {
    std::printf("  stall: %s\n", stall.c_str());
  }
}

int SubmitAndWatch(v1::Coordinator::Stub* stub, const v1::JobSpec& spec,
                   bool watch, v1::Job* final_job,
                   JobTimeline* timeline = nullptr) {
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  v1::Job job;
  grpc::Status st = stub->SubmitJob(&ctx, req, &job);
  if (!st.ok()) Die(absl::StrCat("submit: ", RpcError(st)), 2);
  if (!watch) {
    std::printf("%s\n", job.id().c_str());
    *final_job = job;
    return 0;
  }
  *final_job = Watch(stub, job.id(), StrategyLabel(job.spec()), timeline);
  return final_job->state() == v1::SUCCEEDED ? 0 : 1;
}

std::string MakeLogDir() {
  std::string dir = absl::GetFlag(FLAGS_log_dir);
  if (!dir.empty()) {
    if (system(absl::StrCat("mkdir -p '", dir, "'").c_str()) != 0) {
      Die(absl::StrCat("cannot create --log_dir ", dir));
    }
    return dir;
  }
  char tmpl[] = "/tmp/gradsync-local-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("cannot create a log directory in /tmp");
  return tmpl;
}

int Local() {
  std::vector<std::pair<v1::Strategy, v1::SyncMode>> pairs;
  if (absl::GetFlag(FLAGS_compare)) {
    for (absl::string_view p : absl::StrSplit(absl::GetFlag(FLAGS_pairs), ',',
                                              absl::SkipEmpty())) {
      std::vector<std::string> sm = absl::StrSplit(p, '-');
      absl::StatusOr<v1::Strategy> strategy =
          sm.size() == 2 ? ParseStrategy(sm[0]) : absl::InvalidArgumentError("");
      absl::StatusOr<v1::SyncMode> mode =
          sm.size() == 2 ? ParseSyncMode(sm[1]) : absl::InvalidArgumentError("");
      if (!strategy.ok() || !mode.ok()) {
        Die(absl::StrCat("--pairs: '", p, "' is not STRATEGY-MODE (e.g. ring-async)"), 2);
      }
      pairs.emplace_back(*strategy, *mode);
    }
    if (pairs.empty()) Die("--pairs is empty", 2);
  } else {
    pairs.emplace_back(EnumFlag(ParseStrategy(absl::GetFlag(FLAGS_strategy))),
                       EnumFlag(ParseSyncMode(absl::GetFlag(FLAGS_mode))));
  }
  // Validate locally-checkable flags before starting processes.
  if (absl::GetFlag(FLAGS_workers) < 1 || absl::GetFlag(FLAGS_workers) > 64) {
    Die("--workers must be between 1 and 64 for a local cluster", 2);
  }
  if (absl::GetFlag(FLAGS_ps_shards) < 1 || absl::GetFlag(FLAGS_ps_shards) > 16) {
    Die("--ps_shards must be between 1 and 16 for a local cluster", 2);
  }
  LocalClusterOptions o;
  o.workers = absl::GetFlag(FLAGS_workers);
  o.ps_shards = absl::GetFlag(FLAGS_ps_shards);
  o.bin_dir = SelfDir();
  o.log_dir = MakeLogDir();
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  o.tuning_file = absl::GetFlag(FLAGS_tuning_file);
  o.log_level = absl::GetFlag(FLAGS_log_level);
  o.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  o.interrupted = &g_interrupted;
  o.tls_dir = absl::GetFlag(FLAGS_tls_dir);
  std::printf("starting 1 server, %d PS shard(s), %d workers (logs in %s)\n",
              o.ps_shards, o.workers, o.log_dir.c_str());
  std::fflush(stdout);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(o);
  if (!cluster.ok()) {
    Die(std::string(cluster.status().message()), g_interrupted ? 130 : 1);
  }
  SetClusterSecurity((*cluster)->client_security());  // its random token
  auto stub = Connect((*cluster)->coordinator());
  std::vector<v1::Job> jobs;
  std::vector<JobTimeline> timelines;
  int rc = 0;
  for (const auto& [strategy, mode] : pairs) {
    if (g_interrupted) break;
    v1::JobSpec spec = SpecFromFlags();
    spec.set_strategy(strategy);
    spec.set_mode(mode);
    v1::Job job;
    JobTimeline timeline;
    if (SubmitAndWatch(stub.get(), spec, true, &job, &timeline) != 0) rc = 1;
    jobs.push_back(job);
    timelines.push_back(std::move(timeline));
    if (!absl::GetFlag(FLAGS_compare)) PrintJob(job);
  }
  (*cluster)->Shutdown();
  if (g_interrupted) return 130;
  if (absl::GetFlag(FLAGS_compare)) {
    std::printf("\n%s", CompareTable(jobs).c_str());
  }
  WriteResults(jobs, absl::GetFlag(FLAGS_compare), &timelines);
  WriteTraces(jobs);
  return rc;
}

std::string NeedId(const std::vector<char*>& args, const char* cmd) {
  if (args.size() < 3) Die(absl::StrCat(cmd, ": missing job id (gradsync ", cmd, " ID)"), 2);
  return args[2];
}

bool IsBench(const std::vector<char*>& args) {
  const std::string cmd = args[1];
  return cmd == "bench" ||
         (cmd == "local" && args.size() >= 3 && std::string(args[2]) == "bench");
}

int Bench(bool local) {
  absl::StatusOr<BenchCommandOptions> bench = BenchOptionsFromFlags(local);
  if (!bench.ok()) Die(std::string(bench.status().message()), 2);
  CommandHooks hooks;
  hooks.interrupted = &g_interrupted;
  hooks.set_watch_context = [](grpc::ClientContext* ctx) {
    absl::MutexLock lock(&g_watch_mu);
    g_watch_ctx = ctx;
    if (ctx != nullptr && g_interrupted) ctx->TryCancel();
  };
  return RunBenchCommand(*bench, hooks);
}

int Submit(const std::string& server) {
  auto stub = Connect(server);
  v1::Job job;
  const bool wait = absl::GetFlag(FLAGS_wait);
  const std::string resume = absl::GetFlag(FLAGS_resume);
  const v1::JobSpec spec =
      resume.empty() ? SpecFromFlags() : ResumeSpec(stub.get(), resume);
  std::vector<JobTimeline> timeline(1);
  int rc = SubmitAndWatch(stub.get(), spec, wait, &job, &timeline[0]);
  if (wait) {
    PrintJob(job);
    WriteResults({job}, false, &timeline);
    WriteTraces({job});
  }
  return rc;
}

int WatchCommand(const std::string& server, const std::string& id) {
  auto stub = Connect(server);
  std::vector<JobTimeline> timeline(1);
  v1::Job job = Watch(stub.get(), id, id, &timeline[0]);
  PrintJob(job);
  WriteResults({job}, false, &timeline);
  WriteTraces({job});
  return job.state() == v1::SUCCEEDED ? 0 : 1;
}

// `status ID` or `cancel ID`.
int StatusOrCancel(const std::string& server, const std::string& cmd,
                   const std::string& id) {
  auto stub = Connect(server);
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
  v1::Job job;
  grpc::Status st;
  if (cmd == "status") {
    v1::GetJobRequest req;
    req.set_id(id);
    st = stub->GetJob(&ctx, req, &job);
  } else {
    v1::CancelJobRequest req;
    req.set_id(id);
    st = stub->CancelJob(&ctx, req, &job);
  }
  if (!st.ok()) Die(absl::StrCat(cmd, " ", id, ": ", RpcError(st)));
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("%s\n", JobToJson(job).dump(2).c_str());
  } else {
    PrintJob(job);
  }
  return 0;
}

void PrintListJson(const v1::ListJobsResponse& resp) {
  nlohmann::json j;
  j["jobs"] = nlohmann::json::array();
  for (const v1::Job& job : resp.jobs()) j["jobs"].push_back(JobToJson(job));
  j["workers"] = nlohmann::json::array();
  for (const v1::WorkerInfo& w : resp.workers()) {
    j["workers"].push_back({{"id", w.id()}, {"peer_address", w.peer_address()},
                            {"state", w.state()}, {"job_id", w.job_id()},
                            {"num_gpus", w.num_gpus()}});
  }
  std::printf("%s\n", j.dump(2).c_str());
}

int List(const std::string& server) {
  auto stub = Connect(server);
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
  v1::ListJobsResponse resp;
  grpc::Status st = stub->ListJobs(&ctx, v1::ListJobsRequest(), &resp);
  if (!st.ok()) Die(absl::StrCat("list: ", RpcError(st)));
  if (absl::GetFlag(FLAGS_json)) {
    PrintListJson(resp);
    return 0;
  }
  std::printf("workers (%d), PS shards available: %d\n", resp.workers_size(),
              resp.ps_shards());
  for (const v1::WorkerInfo& w : resp.workers()) {
    std::printf("  %-12s %-22s %-5s %s\n", w.id().c_str(), w.peer_address().c_str(),
                w.state().c_str(), w.job_id().c_str());
  }
  std::printf("jobs (%d)\n", resp.jobs_size());
  for (const v1::Job& job : resp.jobs()) PrintJob(job);
  return 0;
}

int Run(const std::vector<char*>& args) {
  const std::string cmd = args[1];
  // The cluster token (--token_file, else $GRADSYNC_TOKEN) and TLS for every
  // command that dials; `local` replaces it with its own cluster's.
  absl::StatusOr<ClusterSecurity> security =
      SecurityFromCommandLine(SecurityRole::kClient);
  if (!security.ok()) Die(std::string(security.status().message()), 2);
  SetClusterSecurity(*std::move(security));
  if (IsBench(args)) return Bench(cmd == "local");
  if (cmd == "local") return Local();
  const std::string server = absl::GetFlag(FLAGS_server);
  if (cmd == "submit") return Submit(server);
  if (cmd == "watch") return WatchCommand(server, NeedId(args, "watch"));
  if (cmd == "status" || cmd == "cancel") {
    return StatusOrCancel(server, cmd, NeedId(args, cmd.c_str()));
  }
  if (cmd == "list") return List(server);
  Die(absl::StrCat("unknown command '", cmd, "'; run gradsync --help"), 2);
  return 2;
}

}  // namespace
}  // namespace gradsync

int main(int argc, char** argv) {
  // Accept --batch-size as well as --batch_size.
  std::vector<std::string> norm(argv, argv + argc);
  for (std::string& a : norm) {
    if (a.rfind("--", 0) == 0) {
      size_t end = a.find('=');
      for (size_t i = 2; i < std::min(end, a.size()); ++i) {
        if (a[i] == '-') a[i] = '_';
      }
    }
  }
  std::vector<char*> nargv;
  for (std::string& a : norm) nargv.push_back(a.data());
  absl::SetProgramUsageMessage(gradsync::kUsage);
  absl::FlagsUsageConfig cfg;
  cfg.contains_help_flags = [](absl::string_view f) {
    return f.find("client/main.cc") != absl::string_view::npos ||
           f.find("grpc/security_flags.cc") != absl::string_view::npos ||
           f.find("client/bench_flags.cc") != absl::string_view::npos;
  };
  absl::SetFlagsUsageConfig(cfg);
  std::vector<char*> args = absl::ParseCommandLine(static_cast<int>(nargv.size()),
                                                   nargv.data());
  if (args.size() < 2) {
    std::cerr << gradsync::kUsage;
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  // Ctrl-C / SIGTERM: stop watching; the command cancels its job and cleans up.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // The first signal cancels the job and cleans up; a second one exits at
  // once (the daemons of `local` die with us through PR_SET_PDEATHSIG).
  std::thread([set]() mutable {
    int sig;
    sigwait(&set, &sig);
    gradsync::g_interrupted = true;
    {
      absl::MutexLock lock(&gradsync::g_watch_mu);
      if (gradsync::g_watch_ctx != nullptr) gradsync::g_watch_ctx->TryCancel();
    }
    sigwait(&set, &sig);
    std::fprintf(stderr, "gradsync: interrupted again; exiting\n");
    _exit(130);
  }).detach();
  return gradsync::Run(args);
}
