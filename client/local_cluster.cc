#include "client/local_cluster.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/job_secret.h"
#include "common/grpc/security_flags.h"
#include "common/grpc/transport_flags.h"
#include "common/signals.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

namespace gradsync {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The rest of the first complete line of `out` that starts with `prefix`,
// cut at `end` when given, with 0.0.0.0 replaced by 127.0.0.1; empty when
// there is no such line yet.
std::string Announced(const std::string& out, absl::string_view prefix,
                      absl::string_view end = "") {
  for (size_t pos = 0, nl; (nl = out.find('\n', pos)) != std::string::npos;
       pos = nl + 1) {
    absl::string_view line(out.data() + pos, nl - pos);
    if (!absl::ConsumePrefix(&line, prefix)) continue;
    if (!end.empty()) line = line.substr(0, line.find(end));
    std::string address(line);
    if (absl::StartsWith(address, "0.0.0.0:")) {
      address = absl::StrCat("127.0.0.1", address.substr(7));
    }
    return address;
  }
  return "";
}

std::string LastLines(const std::string& path, int n) {
  std::string s = ReadFile(path);
  size_t pos = s.size();
  for (int i = 0; i <= n && pos != std::string::npos && pos > 0; ++i) {
    pos = s.rfind('\n', pos - 1);
  }
  // An empty file (a worker logs nothing at --log_level=warn) has no line.
  return pos == std::string::npos || pos >= s.size() ? s : s.substr(pos + 1);
}

}  // namespace

std::string SelfDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, n);
  return p.substr(0, p.rfind('/'));
}

absl::StatusOr<LocalCluster::Process> LocalCluster::Spawn(
    const std::string& name, const std::string& binary,
    const std::vector<std::string>& args, absl::Time deadline) {
  Process p;
  p.name = name;
  p.log = absl::StrCat(options_.log_dir, "/", name, ".log");
  p.out = absl::StrCat(options_.log_dir, "/", name, ".out");
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot execute ", binary));
  }
  std::vector<std::string> argv_s = {binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  argv_s.insert(argv_s.end(), security_args_.begin(), security_args_.end());
  std::vector<char*> argv;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  // A reused --log_dir holds the last run's files: remove them here, or the
  // loop below may read the old "listening on" before the child truncates.
  unlink(p.out.c_str());
  unlink(p.log.c_str());
  const pid_t parent = getpid();
  // The child has SIGINT and SIGTERM blocked from the fork through exec, so
  // that one sent while the daemon's libraries load waits for it (the
  // daemons block them and sigwait, common/signals.h) rather than killing it
  // by the default action.
  const sigset_t termination = TerminationSignals();
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &termination, &old_mask);
  pid_t pid = fork();
  if (pid != 0) pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // Child: die with the CLI, own log files, only those two blocked.
    sigprocmask(SIG_SETMASK, &termination, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    setpgid(0, 0);  // Ctrl-C at the terminal goes to the CLI only
    int out = open(p.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(p.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) dup2(out, 1);
    if (err >= 0) dup2(err, 2);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  p.pid = pid;
  // Wait for "listening on HOST:PORT" on its stdout (the daemons print
  // "metrics at http://HOST:PORT/metrics" before it).
  while (true) {
    std::string out = ReadFile(p.out);
    p.address = Announced(out, "listening on ");
    if (!p.address.empty()) {
      p.metrics = Announced(out, "metrics at http://", "/metrics");
      p.dashboard = Announced(out, "dashboard at http://", "/");
      return p;
    }
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      p.pid = -1;
      return absl::UnavailableError(
          absl::StrCat(name, " exited during start-up; its log ", p.log, " ends with:\n",
                       LastLines(p.log, 5)));
    }
    const bool interrupted =
        options_.interrupted != nullptr && options_.interrupted->load();
    if (absl::Now() > deadline || interrupted) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      if (interrupted) return absl::CancelledError("interrupted");
      return absl::DeadlineExceededError(
          absl::StrCat(name, " did not start in time; see ", p.log));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// An empty --metrics_listen is the default: off.
std::string LocalCluster::MetricsArg() const {
  return absl::StrCat("--metrics_listen=", options_.metrics ? "127.0.0.1:0" : "");
}

std::vector<std::string> LocalCluster::WorkerArgs(int w) const {
  // The workers use this process's --peer_bdp_probe and --ps_push_streams.
  std::vector<std::string> args = {absl::StrCat("--coordinator=", server_.address),
                                   "--listen=127.0.0.1:0",
                                   absl::StrCat("--id=w", w),
                                   absl::StrCat("--log_level=", options_.log_level),
                                   MetricsArg(),
                                   PeerBdpProbeArg(),
                                   PsPushStreamsArg()};
  if (!options_.allowed_data_dirs.empty()) {
    args.push_back(absl::StrCat("--allowed_data_dirs=",
                                absl::StrJoin(options_.allowed_data_dirs, ",")));
  }
  if (!options_.data_dir.empty()) {
    args.push_back(absl::StrCat("--data_dir=", options_.data_dir));
  }
  if (!options_.cache_dir.empty()) {
    args.push_back(absl::StrCat("--cache_dir=", options_.cache_dir));
  }
  if (!options_.tuning_file.empty()) {
    args.push_back(absl::StrCat("--tuning_file=", options_.tuning_file));
  }
  args.insert(args.end(), options_.worker_flags.begin(), options_.worker_flags.end());
  if (w >= 0 && w < static_cast<int>(options_.flags_of_worker.size())) {
    const std::vector<std::string>& own = options_.flags_of_worker[w];
    args.insert(args.end(), own.begin(), own.end());
  }
  return args;
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  std::unique_ptr<LocalCluster> c(new LocalCluster());
  c->options_ = options;
  if (absl::Status st = c->PrepareSecurity(); !st.ok()) return st;
  const absl::Time deadline = absl::Now() + options.start_timeout;
  const std::string server_bin = absl::StrCat(options.bin_dir, "/gradsync-server");
  const std::string worker_bin = absl::StrCat(options.bin_dir, "/gradsync-worker");
  const std::string level = absl::StrCat("--log_level=", options.log_level);
  const std::string metrics = c->MetricsArg();
  const std::string state_dir = options.state_dir.empty()
                                    ? absl::StrCat(options.log_dir, "/state")
                                    : options.state_dir;
  // The job key (common/grpc/job_secret.h): the server and every PS shard
  // share it, the workers never see it.
  const std::string key_file = absl::StrCat(options.log_dir, "/job.key");
  if (absl::Status st = JobKey::WriteNewFile(key_file); !st.ok()) return st;
  const std::string key_flag = absl::StrCat("--job_key_file=", key_file);
  const std::string inline_flag =
      options.ps_inline_bytes < 0
          ? ""
          : absl::StrCat("--ps_inline_bytes=", options.ps_inline_bytes);
  std::vector<std::string> extra;
  for (int s = 1; s < options.ps_shards; ++s) {
    // Each shard its own state directory (its checkpoints), as on hosts of
    // their own.
    std::vector<std::string> args = {"--listen=127.0.0.1:0",
                                     "--role=ps",
                                     key_flag,
                                     level,
                                     metrics,
                                     absl::StrCat("--state_dir=", state_dir, "/ps", s)};
    if (!inline_flag.empty()) args.push_back(inline_flag);
    auto p = c->Spawn(absl::StrCat("ps", s), server_bin, args, deadline);
    if (!p.ok()) return p.status();
    c->shards_.push_back(*p);
    extra.push_back(p->address);
  }
  c->server_args_ = {"--role=all",
                     absl::StrCat("--ps_shards=", absl::StrJoin(extra, ",")),
                     absl::StrCat("--heartbeat_timeout=", options.heartbeat_timeout),
                     absl::StrCat("--state_dir=", state_dir),
                     key_flag,
                     level,
                     metrics};
  if (!inline_flag.empty()) c->server_args_.push_back(inline_flag);
  for (const std::string& a : options.server_flags) c->server_args_.push_back(a);
  if (!options.dashboard_listen.empty()) {
    c->server_args_.push_back(
        absl::StrCat("--dashboard_listen=", options.dashboard_listen));
  }
  std::vector<std::string> server_args = c->server_args_;
  server_args.insert(server_args.begin(), "--listen=127.0.0.1:0");
  auto server = c->Spawn("server", server_bin, server_args, deadline);
  if (!server.ok()) return server.status();
  c->server_ = *server;
  for (int w = 0; w < options.workers; ++w) {
    auto p = c->Spawn(absl::StrCat("worker", w), worker_bin, c->WorkerArgs(w), deadline);
    if (!p.ok()) return p.status();
    c->workers_.push_back(*p);
  }
  absl::Status joined = c->WaitForWorkers(deadline);
  if (!joined.ok()) return joined;
  return c;
}

absl::Status LocalCluster::PrepareSecurity() {
  absl::StatusOr<std::string> token = RandomToken();
  if (!token.ok()) return token.status();
  const std::string path = token_file();
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 ||
      write(fd, token->data(), token->size()) != static_cast<ssize_t>(token->size())) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  close(fd);
  SecuritySettings settings;
  settings.token_file = path;
  security_args_ = {absl::StrCat("--token_file=", path)};
  if (!options_.tls_dir.empty()) {
    settings.tls_cert = absl::StrCat(options_.tls_dir, "/cert.pem");
    settings.tls_key = absl::StrCat(options_.tls_dir, "/key.pem");
    settings.tls_ca = absl::StrCat(options_.tls_dir, "/ca.pem");
    security_args_.push_back(absl::StrCat("--tls_cert=", settings.tls_cert));
    security_args_.push_back(absl::StrCat("--tls_key=", settings.tls_key));
    security_args_.push_back(absl::StrCat("--tls_ca=", settings.tls_ca));
  }
  absl::StatusOr<ClusterSecurity> security =
      ResolveSecurity(settings, SecurityRole::kClient);
  if (!security.ok()) return security.status();
  security_ = *std::move(security);
  return absl::OkStatus();
}

absl::Status LocalCluster::WaitForWorkers(absl::Time deadline, int want) {
  if (want < 0) want = options_.workers;
  auto stub = v1::Coordinator::NewStub(
      MakeSecureChannel(server_.address, DefaultChannelArgs(), security_));
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(2)));
    v1::ListJobsResponse resp;
    grpc::Status st = stub->ListJobs(&ctx, v1::ListJobsRequest(), &resp);
    if (st.ok() && resp.workers_size() >= want) {
      return absl::OkStatus();
    }
    absl::Status alive = CheckAlive();
    if (!alive.ok()) return alive;
    if (options_.interrupted != nullptr && options_.interrupted->load()) {
      return absl::CancelledError("interrupted");
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("only ", resp.workers_size(), " of ", want,
                       " workers joined in time; logs in ", options_.log_dir));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

absl::Status LocalCluster::RestartServer() {
  if (server_.pid > 0) {
    kill(server_.pid, SIGKILL);
    int status;
    waitpid(server_.pid, &status, 0);
    server_.pid = -1;
  }
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  std::vector<std::string> args = server_args_;
  args.insert(args.begin(), absl::StrCat("--listen=", server_.address));
  auto server = Spawn(absl::StrCat("server-", ++server_restarts_),
                      absl::StrCat(options_.bin_dir, "/gradsync-server"), args, deadline);
  if (!server.ok()) return server.status();
  server_ = *server;
  return WaitForWorkers(deadline);
}

std::vector<LocalCluster::Process*> LocalCluster::All() {
  std::vector<Process*> all;
  for (Process& p : workers_) all.push_back(&p);
  all.push_back(&server_);
  for (Process& p : shards_) all.push_back(&p);
  return all;
}

absl::Status LocalCluster::CheckAlive(bool servers_only) {
  for (Process* p : All()) {
    if (p->pid <= 0) continue;
    if (servers_only && p >= workers_.data() && p < workers_.data() + workers_.size()) {
      continue;
    }
    int status;
    if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
      p->pid = -1;
      return absl::UnavailableError(absl::StrCat(p->name,
                                                 " exited unexpectedly; its log ", p->log,
                                                 " ends with:\n", LastLines(p->log, 5)));
    }
  }
  return absl::OkStatus();
}

void LocalCluster::KillWorker(int i) {
  Process& p = workers_[i];
  if (p.pid > 0) {
    kill(p.pid, SIGKILL);
    int status;
    waitpid(p.pid, &status, 0);
    p.pid = -1;
  }
}

absl::Status LocalCluster::RestartWorker(int i) {
  KillWorker(i);
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  auto p =
      Spawn(absl::StrCat("worker", i, "-", ++worker_restarts_),
            absl::StrCat(options_.bin_dir, "/gradsync-worker"), WorkerArgs(i), deadline);
  if (!p.ok()) return p.status();
  workers_[i] = *p;
  const int running = static_cast<int>(std::count_if(
      workers_.begin(), workers_.end(), [](const Process& w) { return w.pid > 0; }));
  return WaitForWorkers(deadline, running);
}

void LocalCluster::StopWorker(int i) {
  if (workers_[i].pid > 0) kill(workers_[i].pid, SIGSTOP);
}

void LocalCluster::ContinueWorker(int i) {
  if (workers_[i].pid > 0) kill(workers_[i].pid, SIGCONT);
}

void LocalCluster::StopShard(int i) {
  if (shards_[i].pid > 0) kill(shards_[i].pid, SIGSTOP);
}

void LocalCluster::ContinueShard(int i) {
  if (shards_[i].pid > 0) kill(shards_[i].pid, SIGCONT);
}

void LocalCluster::Shutdown() {
  std::vector<Process*> all = All();
  for (Process* p : all) {
    if (p->pid > 0) kill(p->pid, SIGTERM);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(3);
  for (Process* p : all) {
    if (p->pid <= 0) continue;
    int status;
    while (waitpid(p->pid, &status, WNOHANG) == 0) {
      if (absl::Now() > deadline) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &status, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    p->pid = -1;
  }
}

std::string LocalCluster::Token() const {
  return std::string(absl::StripAsciiWhitespace(ReadFile(token_file())));
}

LocalCluster::~LocalCluster() { Shutdown(); }

}  // namespace gradsync
