// What the integration tests share: a LocalCluster of real daemons on
// loopback with a Coordinator stub (every call with a 5 s deadline), job
// specs, and file and shell helpers. The cluster is shut down (SIGTERM, then
// SIGKILL) when the Cluster is destroyed, and the daemons die with the test
// process (PR_SET_PDEATHSIG).
#ifndef GRADSYNC_TESTS_INTEGRATION_CLUSTER_FIXTURE_H_
#define GRADSYNC_TESTS_INTEGRATION_CLUSTER_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/local_cluster.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

#ifndef GRADSYNC_BIN_DIR
#error "GRADSYNC_BIN_DIR must point at the directory of the built binaries"
#endif

namespace gradsync {

// A fresh directory under /tmp.
std::string TempDir();
// The whole file; empty if it cannot be read.
std::string Slurp(const std::string& path);
// Runs a shell command with a timeout; returns its exit code.
int Shell(const std::string& cmd, int timeout_s);

// The algorithm `gradsync local --autotune` said allreduce jobs run ("" if
// it printed none).
std::string AutotunedAlgorithm(const std::string& out);

class Cluster {
 public:
  // `metrics`: every daemon serves /metrics (LocalCluster::Process::metrics).
  // A failed start is a test failure; ok() then says false.
  // `heartbeat_timeout`: the server's --heartbeat_timeout in seconds.
  // `tls_dir`: LocalClusterOptions::tls_dir (mutual TLS), empty: plaintext.
  // `ps_inline_bytes`: LocalClusterOptions::ps_inline_bytes (< 0: default).
  // `server_flags`: LocalClusterOptions::server_flags.
  explicit Cluster(int workers, int shards = 1, bool metrics = false,
                   double heartbeat_timeout = 6.0, const std::string& tls_dir = "",
                   int64_t ps_inline_bytes = -1,
                   const std::vector<std::string>& server_flags = {});
  // The options the constructor above starts from (a temporary log
  // directory, this build's binaries), for tests that set more of them.
  static LocalClusterOptions DefaultOptions(int workers);
  explicit Cluster(const LocalClusterOptions& options);
  LocalCluster* operator->() { return cluster_.get(); }
  bool ok() const { return cluster_ != nullptr; }
  // A channel to any of the cluster's daemons that carries its token (and
  // TLS when it runs TLS).
  std::shared_ptr<grpc::Channel> Channel(const std::string& target) const;
  // A channel to any daemon at `address` for tests that act as an outside
  // client (hostile frames, raw stubs): the daemons' channel settings, but no
  // send limit of its own, so that oversized messages reach the server. Every
  // raw channel of the tests is made here; it carries the cluster's token
  // (and TLS), so what it sends reaches the handlers.
  std::shared_ptr<grpc::Channel> RawChannel(const std::string& target) const;
  // "--server=ADDR --token_file=FILE": what a `gradsync` command line needs
  // to reach the coordinator.
  std::string CliFlags() const;

  grpc::Status Submit(const v1::JobSpec& spec, v1::Job* job);
  grpc::Status Get(const std::string& id, v1::Job* job);
  grpc::Status List(v1::ListJobsResponse* resp);
  grpc::Status Cancel(const std::string& id, v1::Job* job);
  // Reads job `id`'s WatchJob stream to its end (10 s deadline).
  grpc::Status Watch(const std::string& id, std::vector<v1::JobEvent>* events);
  // Polls until pred(job) or the deadline; returns the last job seen.
  v1::Job WaitFor(const std::string& id, absl::Duration limit,
                  const std::function<bool(const v1::Job&)>& pred);
  // Live idle workers; -1 when the coordinator does not answer.
  int IdleWorkers();

 private:
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

bool Terminal(const v1::Job& j);

// A small valid training spec: batch 32, Adam, lr 0.001.
v1::JobSpec Spec(const std::string& strategy, const std::string& mode, int workers);

}  // namespace gradsync

#endif  // GRADSYNC_TESTS_INTEGRATION_CLUSTER_FIXTURE_H_
