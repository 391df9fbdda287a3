// `gradsync local`: a server, optional extra PS shards and N workers as real
// processes on loopback. Every process is killed when the LocalCluster is
// destroyed, and also if this process dies (PR_SET_PDEATHSIG).
#ifndef GRADSYNC_CLIENT_LOCAL_CLUSTER_H_
#define GRADSYNC_CLIENT_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/grpc/security.h"

namespace gradsync {

struct LocalClusterOptions {
  int workers = 4;
  int ps_shards = 1;    // total shards (server is shard 0)
  std::string bin_dir;  // where gradsync-server / gradsync-worker live
  std::string log_dir;  // one .log per process
  // The server's --state_dir (job history, shard 0's checkpoints); empty:
  // <log_dir>/state, so that `gradsync local` keeps its history in its own
  // temporary directory. Extra shard s uses <state_dir>/ps<s>.
  std::string state_dir;
  std::string data_dir;  // passed to workers when set
  // Workers' --allowed_data_dirs (a tensors-on-workers file must be in one).
  std::vector<std::string> allowed_data_dirs;
  std::string tuning_file;  // workers' --tuning_file, when set
  std::string cache_dir;    // workers' --cache_dir (fetched models), when set
  // Further flags of the server (coordinator + shard 0), e.g. its limits,
  // and of every worker.
  std::vector<std::string> server_flags;
  std::vector<std::string> worker_flags;
  // Flags of worker w alone (after worker_flags), e.g. a straggler's
  // --compute_slowdown; workers past the end get none.
  std::vector<std::vector<std::string>> flags_of_worker;
  // The server's --dashboard_listen (Process::dashboard); empty: off.
  std::string dashboard_listen;
  std::string log_level = "info";
  double heartbeat_timeout = 6.0;
  // The server's and every shard's --ps_inline_bytes; < 0: their default.
  int64_t ps_inline_bytes = -1;
  // Every process serves /metrics on a free loopback port (Process::metrics).
  bool metrics = false;
  absl::Duration start_timeout = absl::Seconds(30);
  // Mutual TLS for every process: DIR holding ca.pem, cert.pem and key.pem
  // as deploy/make-dev-certs.sh writes them. Empty: plaintext.
  std::string tls_dir;
  // Start-up gives up (CANCELLED) once this becomes true, e.g. on Ctrl-C.
  const std::atomic<bool>* interrupted = nullptr;
};

class LocalCluster {
 public:
  struct Process {
    std::string name;
    pid_t pid = -1;
    std::string log;        // stderr (spdlog)
    std::string out;        // stdout ("listening on ...")
    std::string address;    // as printed by the process
    std::string metrics;    // HOST:PORT of its /metrics, when options.metrics
    std::string dashboard;  // the server's dashboard HOST:PORT, when served
  };

  // Starts the processes and waits until the coordinator lists all workers.
  // UNAVAILABLE naming the process and its log when one fails to start.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(
      const LocalClusterOptions& options);
  ~LocalCluster();

  const std::string& coordinator() const { return server_.address; }
  // What a client of this cluster needs: the random cluster token that Start
  // wrote to <log_dir>/token (0600) and gave every process, and the TLS
  // files when options.tls_dir is set. For MakeSecureChannel or
  // SetClusterSecurity.
  const ClusterSecurity& client_security() const { return security_; }
  // The token file, for command-line clients (--token_file=).
  std::string token_file() const { return options_.log_dir + "/token"; }
  // The cluster token this cluster made (token_file's content).
  std::string Token() const;
  const Process& server() const { return server_; }
  const std::vector<Process>& workers() const { return workers_; }
  // The PS-only shards: shards()[i] is shard i + 1 (the server is shard 0).
  const std::vector<Process>& shards() const { return shards_; }
  // OK while every process runs; else names the first that exited. With
  // `servers_only`, workers that exited are not counted (elastic jobs go on
  // without them).
  absl::Status CheckAlive(bool servers_only = false);
  // SIGKILLs worker i (failure tests).
  void KillWorker(int i);
  // Starts worker i again (after KillWorker) with its old flags and id, and
  // waits until it has joined (elastic tests: a worker coming back).
  absl::Status RestartWorker(int i);
  // SIGSTOPs worker i: a hung process that keeps its connections open.
  void StopWorker(int i);
  // SIGCONTs worker i (after StopWorker).
  void ContinueWorker(int i);
  // SIGSTOPs / SIGCONTs shards()[i].
  void StopShard(int i);
  void ContinueShard(int i);
  // SIGKILLs the server and starts it again on the same address with the
  // same arguments (so the same state directory), then waits until every
  // worker has joined it again (they reconnect by themselves). UNAVAILABLE
  // or DEADLINE_EXCEEDED as Start; the restarted server logs to server-<k>.
  absl::Status RestartServer();
  // SIGTERM, then SIGKILL after a grace period; idempotent.
  void Shutdown();

 private:
  LocalCluster() = default;
  // The flags of worker w (after the server has started) and every
  // daemon's --metrics_listen.
  std::vector<std::string> WorkerArgs(int w) const;
  std::string MetricsArg() const;
  absl::StatusOr<Process> Spawn(const std::string& name, const std::string& binary,
                                const std::vector<std::string>& args,
                                absl::Time deadline);
  std::vector<Process*> All();
  // Writes the token file, reads the TLS files and fills security_args_.
  absl::Status PrepareSecurity();
  // Until the coordinator lists `want` workers (< 0: options_.workers;
  // Start's last step).
  absl::Status WaitForWorkers(absl::Time deadline, int want = -1);

  LocalClusterOptions options_;
  ClusterSecurity security_;
  std::vector<std::string> security_args_;  // given to every process
  Process server_;
  std::vector<std::string> server_args_;  // without --listen
  int server_restarts_ = 0;
  int worker_restarts_ = 0;
  std::vector<Process> shards_;
  std::vector<Process> workers_;
};

// Directory of the running executable (for finding sibling binaries).
std::string SelfDir();

}  // namespace gradsync

#endif  // GRADSYNC_CLIENT_LOCAL_CLUSTER_H_
