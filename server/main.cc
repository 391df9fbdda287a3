// gradsync-server: the Coordinator and/or a ParameterServer shard.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/command_line.h"
#include "common/env.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/security_flags.h"
#include "common/logging.h"
#include "common/metrics/metrics_server.h"
#include "common/process_setup.h"
#include "common/ps_layout.h"
#include "common/signals.h"
#include "server/coordinator/coordinator.h"
#include "server/coordinator/dashboard_server.h"
#include "server/coordinator/sqlite_job_store.h"
#include "server/ps/ps_service.h"
#include "server/ps/ps_store.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:50051",
          "HOST:PORT to serve on (port 0 picks a free port, printed on stdout "
          "as 'listening on HOST:PORT').");
ABSL_FLAG(std::string, role, "all",
          "coordinator: jobs and workers only; ps: one parameter-server shard "
          "only; all: coordinator plus PS shard 0 in this process.");
ABSL_FLAG(std::string, advertise, "",
          "HOST:PORT under which workers reach this process's PS shard "
          "(default: the listen address, with 0.0.0.0 replaced by 127.0.0.1).");
ABSL_FLAG(std::string, ps_shards, "",
          "Coordinator: comma-separated HOST:PORT list of extra PS shard "
          "servers (started with --role=ps). With --role=all this process is "
          "shard 0 and these follow it.");
ABSL_FLAG(double, heartbeat_timeout, 6.0,
          "Coordinator: seconds without a worker heartbeat before the worker is "
          "declared dead and its job fails.");
ABSL_FLAG(double, register_timeout, 10.0,
          "Coordinator: seconds a Join stream may stay open without registering "
          "a worker before the coordinator closes it (a client that opens "
          "streams and never speaks holds nothing for long).");
ABSL_FLAG(std::string, state_dir, "./gradsync-state",
          "Coordinator: directory of the job history (SQLite file jobs.db: "
          "specs, states, times, errors, results, per-epoch figures), "
          "created if missing. After a restart list/status/watch show "
          "earlier jobs; jobs that were running are FAILED \"coordinator "
          "restarted\", queued ones stay queued. A corrupt or unwritable "
          "database stops the server at start-up and is left untouched. "
          "PS shards (--role=ps or all) keep job checkpoints in "
          "DIR/checkpoints/JOB/ (see docs/operations.md, Checkpoints and resume); "
          "--role=ps opens no database.");
ABSL_FLAG(uint64_t, max_ended_jobs, 1000,
          "Coordinator: ended jobs kept in memory (list, status, watch); the "
          "job that ended first is forgotten first. Queued and running jobs "
          "are always kept.");
ABSL_FLAG(uint64_t, max_events_per_job, 10000,
          "Coordinator: epoch and stall events kept per job for watch; later "
          "ones are not recorded (state changes always are).");
ABSL_FLAG(uint64_t, max_stored_jobs, 10000,
          "Coordinator: ended jobs kept in the --state_dir history, oldest "
          "submitted deleted first; 0 keeps all.");
ABSL_FLAG(double, dead_worker_grace, 600,
          "Coordinator: seconds a lost worker stays listed before it is "
          "forgotten.");
ABSL_FLAG(uint64_t, max_blob_bytes, 512ull << 20,
          "Coordinator: the largest file (a TorchScript model) a client may upload "
          "with a job; kept by content hash under --state_dir/blobs.");
ABSL_FLAG(uint64_t, max_data_bytes, 4ull << 30,
          "Coordinator: the largest tensor data file (--data=tensors:PATH) a client "
          "may upload with a job; kept by content hash under --state_dir/blobs.");
ABSL_FLAG(uint64_t, max_blobs_total_bytes, 16ull << 30,
          "Coordinator: all uploaded files kept under --state_dir/blobs together, "
          "at most; an upload that would pass it is refused (RESOURCE_EXHAUSTED, "
          "naming this flag). Blobs are never deleted by the server: remove unused "
          "ones from that directory by hand.");
ABSL_FLAG(uint64_t, blob_disk_reserve_bytes, 1ull << 30,
          "Coordinator: disk space an upload must leave free on --state_dir's file "
          "system, so that the job history (jobs.db) and checkpoints always have "
          "room; an upload that would leave less is refused.");
ABSL_FLAG(int, max_streams, 1024,
          "Coordinator: Join and WatchJob streams open at once (each holds "
          "threads); beyond it new ones get RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_blob_streams, 16,
          "Coordinator: PutBlob and GetBlob streams open at once, in slots of "
          "their own (uploads never keep workers from joining); beyond it new "
          "ones get RESOURCE_EXHAUSTED. An upload that sends nothing for 30 s "
          "is cancelled.");
ABSL_FLAG(uint64_t, ps_max_ended_jobs, gradsync::PsStore::kDefaultMaxEndedJobs,
          "PS shard: ended job ids remembered so that their late calls are "
          "refused; the oldest is forgotten first.");
ABSL_FLAG(uint64_t, ps_inline_bytes, gradsync::kPsInlineBytes,
          "PS shard: a push of at most this many float32 bytes is summed "
          "(and, as the step's last push, stepped; answered too for up to 4 "
          "ranks) on the gRPC "
          "thread that read it when its slice is free and keeps no "
          "checkpoints; larger ones go to the reduce threads. Saves a thread "
          "hand-off per small push; 0: every push goes to the reduce "
          "threads; at most 1048576.");
ABSL_FLAG(int64_t, ps_reduce_threads, gradsync::kPsReduceThreads,
          "PS shard: threads that sum pushes too large to sum inline (or "
          "that find their slice busy), step the parameters and send a "
          "step's answers beyond the first few; 1..64. More can help a "
          "shard with many cores serving many workers; on a small machine "
          "they only contend for cores.");
ABSL_FLAG(std::string, job_key_file, "",
          "File with the job key (64+ hex digits, e.g. from `head -c 32 "
          "/dev/urandom | xxd -p -c 64`) that job secrets are derived from. "
          "The coordinator and every --role=ps shard of a cluster must be "
          "given the same file; workers must not. Default: --role=all and "
          "coordinator make a key of their own (then only PS shard 0, in "
          "this process, can serve jobs); --role=ps does not start without "
          "it.");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error or off.");
ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT to serve Prometheus metrics on (GET /metrics; port 0 "
          "picks a free port, printed on stdout as 'metrics at "
          "http://HOST:PORT/metrics'). Default: off.");
ABSL_FLAG(std::string, dashboard_listen, "",
          "Coordinator: HOST:PORT to serve the web dashboard on (jobs, queue, "
          "workers, live loss/accuracy curves, comm vs compute, stalls, a "
          "compare view; port 0 picks a free port, printed on stdout as "
          "'dashboard at http://HOST:PORT/'). It asks for the cluster token: "
          "open http://HOST:PORT/?token=TOKEN once (sets a cookie) or send "
          "'Authorization: Bearer TOKEN'. Plain HTTP: bind it to 127.0.0.1 "
          "and tunnel, or put a TLS proxy in front (docs/operations.md, "
          "Dashboard). Default: off.");

namespace {

// Opens the job history under --state_dir, builds the coordinator on it and
// recovers the stored jobs; the coordinator's gauges go into `registry`.
// `history` and `blob_store` (uploaded models, --state_dir/blobs) must
// outlive `coordinator` (the caller declares them first).
absl::Status StartCoordinator(gradsync::CoordinatorOptions copts,
                              gradsync::MetricsRegistry* registry,
                              std::unique_ptr<gradsync::SqliteJobStore>* history,
                              std::unique_ptr<gradsync::ContentStore>* blob_store,
                              std::unique_ptr<gradsync::Coordinator>* coordinator) {
  auto opened = gradsync::SqliteJobStore::Open(absl::GetFlag(FLAGS_state_dir));
  if (!opened.ok()) return opened.status();
  *history = *std::move(opened);
  copts.store = history->get();
  auto blobs = gradsync::ContentStore::Open(absl::GetFlag(FLAGS_state_dir) + "/blobs");
  if (!blobs.ok()) return blobs.status();
  *blob_store = *std::move(blobs);
  copts.blobs = blob_store->get();
  *coordinator = std::make_unique<gradsync::Coordinator>(copts);
  if (absl::Status st = (*coordinator)->RecoverJobs(); !st.ok()) return st;
  gradsync::RegisterCoordinatorMetrics([c = coordinator->get()] { return c->Stats(); },
                                       registry);
  return absl::OkStatus();
}

// --job_key_file, or a fresh key for a process with a coordinator. A PS-only
// shard has no other way to learn the coordinator's key; without one it
// could serve no job, so it does not start (FAILED_PRECONDITION).
absl::StatusOr<std::shared_ptr<const gradsync::JobKey>> LoadJobKey(
    const std::string& role) {
  const std::string path = absl::GetFlag(FLAGS_job_key_file);
  if (path.empty() && role == "ps") {
    return absl::FailedPreconditionError(
        "required with --role=ps: give this shard the file the coordinator "
        "was given (made once per cluster, e.g. `head -c 32 /dev/urandom | "
        "od -An -tx1 | tr -d ' \\n' > FILE`); without the cluster's job key "
        "a PS shard could serve no job");
  }
  absl::StatusOr<gradsync::JobKey> key =
      path.empty() ? gradsync::JobKey::Generate() : gradsync::JobKey::ReadFile(path);
  if (!key.ok()) return key.status();
  return std::make_shared<const gradsync::JobKey>(*std::move(key));
}

// The coordinator's settings from the flags. With role=all this process is
// PS shard 0, whose address is known only after binding (port 0): its entry
// of ps_addresses is empty until SetShardZeroAddress.
gradsync::CoordinatorOptions CoordinatorOptionsFromFlags(
    const std::string& role, std::shared_ptr<const gradsync::JobKey> job_key) {
  gradsync::CoordinatorOptions copts;
  copts.heartbeat_timeout = absl::Seconds(absl::GetFlag(FLAGS_heartbeat_timeout));
  copts.register_timeout = absl::Seconds(absl::GetFlag(FLAGS_register_timeout));
  copts.retention.max_ended_jobs = absl::GetFlag(FLAGS_max_ended_jobs);
  copts.retention.max_events_per_job = absl::GetFlag(FLAGS_max_events_per_job);
  copts.retention.max_stored_jobs = absl::GetFlag(FLAGS_max_stored_jobs);
  copts.dead_worker_grace = absl::Seconds(absl::GetFlag(FLAGS_dead_worker_grace));
  copts.max_streams = absl::GetFlag(FLAGS_max_streams);
  copts.max_blob_streams = absl::GetFlag(FLAGS_max_blob_streams);
  copts.max_blob_bytes = absl::GetFlag(FLAGS_max_blob_bytes);
  copts.max_data_bytes = absl::GetFlag(FLAGS_max_data_bytes);
  copts.max_blobs_total_bytes = absl::GetFlag(FLAGS_max_blobs_total_bytes);
  copts.blob_disk_reserve_bytes = absl::GetFlag(FLAGS_blob_disk_reserve_bytes);
  copts.job_key = std::move(job_key);
  if (role == "all") copts.ps_addresses.push_back("");
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_ps_shards), ',', absl::SkipEmpty())) {
    copts.ps_addresses.emplace_back(s);
  }
  return copts;
}

// What main needs settled before anything starts; INVALID_ARGUMENT-style
// errors name the flag (main exits 2 with them).
struct Startup {
  std::string role;
  gradsync::ClusterSecurity security;
  std::shared_ptr<const gradsync::JobKey> job_key;
};

absl::StatusOr<Startup> CheckStartup() {
  Startup s;
  s.role = absl::GetFlag(FLAGS_role);
  if (s.role != "all" && s.role != "coordinator" && s.role != "ps") {
    return absl::InvalidArgumentError(
        absl::StrCat("--role must be all, coordinator or ps, got '", s.role, "'"));
  }
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"heartbeat_timeout",
                                       absl::GetFlag(FLAGS_heartbeat_timeout)},
        {"register_timeout", absl::GetFlag(FLAGS_register_timeout)}}) {
    if (!(value > 0) || value > 86400) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", name, " must be a number of seconds above 0 and at most 86400, got ",
          value));
    }
  }
  if (absl::Status st =
          gradsync::CheckPsInlineBytes(absl::GetFlag(FLAGS_ps_inline_bytes));
      !st.ok()) {
    return st;
  }
  if (absl::Status st =
          gradsync::CheckPsReduceThreads(absl::GetFlag(FLAGS_ps_reduce_threads));
      !st.ok()) {
    return st;
  }
  if (absl::Status st = gradsync::InitLogging("server", absl::GetFlag(FLAGS_log_level));
      !st.ok()) {
    return st;
  }
  absl::StatusOr<gradsync::ClusterSecurity> security =
      gradsync::SecurityFromCommandLine(gradsync::SecurityRole::kDaemon);
  if (!security.ok()) return security.status();
  s.security = *std::move(security);
  absl::StatusOr<std::shared_ptr<const gradsync::JobKey>> key = LoadJobKey(s.role);
  if (!key.ok()) {
    return absl::Status(key.status().code(),
                        absl::StrCat("--job_key_file: ", key.status().message()));
  }
  s.job_key = *std::move(key);
  return s;
}

constexpr char kUsage[] =
    "gradsync-server --listen=HOST:PORT [--role=all|coordinator|ps] "
    "[--ps_shards=H:P,...] [--state_dir=DIR] --token_file=PATH|--auth=none "
    "[--tls_cert=PEM --tls_key=PEM --tls_ca=PEM]\n\nRuns the gradsync coordinator (job "
    "queue, "
    "worker registry, rendezvous) and/or a parameter-server shard. "
    "Stops cleanly on SIGINT/SIGTERM. The token and TLS flags (a token "
    "file wins over GRADSYNC_TOKEN): --helpon=security_flags.";

// grpc.health.v1: "" is SERVING once listening (readiness probes), and the
// services this role runs are SERVING by name.
void MarkServing(grpc::Server* server, bool coordinator, bool ps) {
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (health == nullptr) return;
  if (coordinator) health->SetServingStatus("gradsync.v1.Coordinator", true);
  if (ps) health->SetServingStatus("gradsync.v1.ParameterServer", true);
}

// Once listening on `port`: marks the services SERVING, gives the
// coordinator of role all its own PS shard's address, and says where this
// process listens (on stdout for launchers, and in the log), with its PS
// shard's reduce threads and inline limit.
void Announce(grpc::Server* server, const std::string& role, const std::string& listen,
              int port, gradsync::Coordinator* coordinator, int known_shards,
              int reduce_threads) {
  MarkServing(server, coordinator != nullptr, role != "coordinator");
  std::string advertise = absl::GetFlag(FLAGS_advertise);
  if (advertise.empty()) advertise = gradsync::LocalAddress(listen, port);
  if (coordinator != nullptr && role == "all") {
    coordinator->SetShardZeroAddress(advertise);
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  std::cout << "listening on " << absl::StrCat(host, ":", port) << std::endl;
  spdlog::info(
      "gradsync-server role={} listening on {}:{} (advertised {}), "
      "{} PS shard(s) known",
      role, host, port, advertise, known_shards);
  if (role != "coordinator") {
    spdlog::info(
        "PS shard: {} reduce thread(s); pushes of up to {} bytes "
        "summed inline",
        reduce_threads, absl::GetFlag(FLAGS_ps_inline_bytes));
  }
}

// --dashboard_listen: the coordinator's web dashboard, guarded by the
// cluster token (nothing when the flag is empty). FAILED_PRECONDITION with
// --role=ps, which has no coordinator.
absl::Status StartDashboard(gradsync::Coordinator* coordinator,
                            std::unique_ptr<gradsync::DashboardServer>* dashboard) {
  const std::string listen = absl::GetFlag(FLAGS_dashboard_listen);
  if (listen.empty()) return absl::OkStatus();
  if (coordinator == nullptr) {
    return absl::FailedPreconditionError(
        "needs a coordinator (--role=all or coordinator)");
  }
  gradsync::DashboardOptions options;
  options.token = gradsync::GetClusterSecurity().token;
  *dashboard = std::make_unique<gradsync::DashboardServer>(coordinator, options);
  return gradsync::StartDashboardEndpoint(dashboard->get(), listen);
}

// Blocks until SIGINT/SIGTERM, then stops in order: metrics scrapes and
// dashboard requests (they read the coordinator), the coordinator's streams
// and jobs, the PS store's waiting calls, then the server (2 s for calls in
// flight).
void StopOnSignal(grpc::Server* server, gradsync::MetricsServer* metrics,
                  gradsync::DashboardServer* dashboard,
                  gradsync::Coordinator* coordinator, gradsync::PsStore* store) {
  const int sig = gradsync::WaitForTerminationSignal();
  spdlog::info("signal {}: shutting down", sig);
  metrics->Stop();
  if (dashboard != nullptr) dashboard->Stop();
  if (coordinator != nullptr) coordinator->Shutdown();
  store->Shutdown();
  server->Shutdown(
      gradsync::ToChrono(gradsync::Env::Default()->Now() + absl::Seconds(2)));
  server->Wait();
}

// --help lists this daemon's flags and the security and transport ones
// (absl's default looks for a file named after the program, and finds none).
void ListOwnFlagsInHelp() {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view f) {
    return absl::StrContains(f, "server/main.cc") ||
           absl::StrContains(f, "grpc/security_flags.cc") ||
           absl::StrContains(f, "grpc/transport_flags.cc");
  };
  absl::SetFlagsUsageConfig(usage);
}

// Before any library loads (OpenBLAS starts threads as it does): see
// common/signals.h.
__attribute__((section(".preinit_array"), used)) void (*const kBlockSignalsAtLoad)(
    int, char**, char**) = &gradsync::BlockTerminationSignalsAtLoad;

}  // namespace

int main(int argc, char** argv) {
  gradsync::BlockTerminationSignals();
  absl::SetProgramUsageMessage(kUsage);
  ListOwnFlagsInHelp();
  // --token-file as well as --token_file, as the CLI takes them.
  gradsync::CommandLine command_line(argc, argv);
  absl::ParseCommandLine(command_line.argc(), command_line.argv());
  gradsync::PrepareDaemonProcess();  // before any thread starts
  absl::StatusOr<Startup> startup = CheckStartup();
  if (!startup.ok()) {
    std::cerr << "gradsync-server: " << startup.status().message() << "\n";
    return 2;
  }
  const std::string role = startup->role;
  const std::shared_ptr<const gradsync::JobKey> job_key = startup->job_key;
  const std::string listen = absl::GetFlag(FLAGS_listen);
  std::vector<grpc::Service*> services;
  gradsync::MetricsRegistry metrics_registry;  // this process's; outlives all
  gradsync::CountAuthRefusals(&metrics_registry, &startup->security);
  gradsync::SetClusterSecurity(std::move(startup->security));
  gradsync::PsStore store(absl::GetFlag(FLAGS_state_dir) + "/checkpoints",
                          absl::GetFlag(FLAGS_ps_max_ended_jobs));
  const gradsync::PsAccess ps_access(job_key);
  gradsync::PsService ps_service(
      &store, &ps_access,
      // A coordinator serves no PS calls: one idle thread, whatever the flag.
      role == "coordinator" ? 1
                            : static_cast<int>(absl::GetFlag(FLAGS_ps_reduce_threads)),
      role == "coordinator" ? gradsync::PsTraffic{}
                            : gradsync::RegisterPsTraffic(&metrics_registry),
      absl::GetFlag(FLAGS_ps_inline_bytes));
  // Declared before the coordinator, which writes to it until destroyed.
  std::unique_ptr<gradsync::SqliteJobStore> history;
  std::unique_ptr<gradsync::ContentStore> blob_store;
  std::unique_ptr<gradsync::Coordinator> coordinator;
  if (role != "coordinator") services.push_back(&ps_service);
  const gradsync::CoordinatorOptions copts = CoordinatorOptionsFromFlags(role, job_key);
  if (role != "ps") {
    if (absl::Status st = StartCoordinator(copts, &metrics_registry, &history,
                                           &blob_store, &coordinator);
        !st.ok()) {
      std::cerr << "gradsync-server: " << st.message() << "\n";
      return 1;
    }
    services.push_back(coordinator.get());
  }
  gradsync::MetricsServer metrics(&metrics_registry);
  if (absl::Status st =
          gradsync::StartMetricsEndpoint(&metrics, absl::GetFlag(FLAGS_metrics_listen));
      !st.ok()) {
    std::cerr << "gradsync-server: --metrics_listen: " << st.message() << "\n";
    return 1;
  }
  // Reads the coordinator: declared after it, so destroyed (stopped) first.
  std::unique_ptr<gradsync::DashboardServer> dashboard;
  if (absl::Status st = StartDashboard(coordinator.get(), &dashboard); !st.ok()) {
    std::cerr << "gradsync-server: --dashboard_listen: " << st.message() << "\n";
    return 1;
  }
  grpc::EnableDefaultHealthCheckService(true);  // see MarkServing
  absl::StatusOr<gradsync::StartedServer> started =
      gradsync::StartServer(listen, services);
  if (!started.ok()) {
    std::cerr << "gradsync-server: " << started.status().message() << "\n";
    return 1;
  }
  std::unique_ptr<grpc::Server> server = std::move(started->server);
  Announce(server.get(), role, listen, started->port, coordinator.get(),
           role == "ps" ? 1 : static_cast<int>(copts.ps_addresses.size()),
           ps_service.reduce_threads());
  StopOnSignal(server.get(), &metrics, dashboard.get(), coordinator.get(), &store);
  dashboard.reset();
  coordinator.reset();
  return 0;
}
