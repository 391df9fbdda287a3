// What the integration tests share: real daemons on loopback (Cluster, a
// LocalCluster with a Coordinator stub and deadline-bound RPC helpers), shell
// commands with a timeout, temporary directories and a small job spec.
#ifndef GRADSYNC_TESTS_INTEGRATION_CLUSTER_H_
#define GRADSYNC_TESTS_INTEGRATION_CLUSTER_H_

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/local_cluster.h"
#include "common/grpc/grpc_util.h"
#include "common/spec/job_spec.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

#ifndef GRADSYNC_BIN_DIR
#error "GRADSYNC_BIN_DIR must point at the directory of the built binaries"
#endif

namespace gradsync {

inline std::string TempDir() {
  char tmpl[] = "/tmp/gradsync-test-XXXXXX";
  return mkdtemp(tmpl);
}

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command with a timeout; returns its exit code.
inline int Shell(const std::string& cmd, int timeout_s) {
  std::string full = absl::StrCat("timeout -k 5 ", timeout_s, " ", cmd);
  int rc = std::system(full.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

class Cluster {
 public:
  explicit Cluster(int workers, int shards = 1) {
    LocalClusterOptions o;
    o.workers = workers;
    o.ps_shards = shards;
    o.bin_dir = GRADSYNC_BIN_DIR;
    o.log_dir = TempDir();
    o.log_level = "info";
    auto c = LocalCluster::Start(o);
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) cluster_ = std::move(*c);
    if (cluster_) {
      stub_ = v1::Coordinator::NewStub(MakeChannel(cluster_->coordinator()));
    }
  }
  LocalCluster* operator->() { return cluster_.get(); }
  bool ok() const { return cluster_ != nullptr; }

  grpc::Status Submit(const v1::JobSpec& spec, v1::Job* job) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    return stub_->SubmitJob(&ctx, req, job);
  }
  grpc::Status Get(const std::string& id, v1::Job* job) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
    v1::GetJobRequest req;
    req.set_id(id);
    return stub_->GetJob(&ctx, req, job);
  }
  grpc::Status List(v1::ListJobsResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
    return stub_->ListJobs(&ctx, v1::ListJobsRequest(), resp);
  }
  grpc::Status Cancel(const std::string& id, v1::Job* job) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
    v1::CancelJobRequest req;
    req.set_id(id);
    return stub_->CancelJob(&ctx, req, job);
  }
  // Reads job `id`'s WatchJob stream to its end (10 s deadline).
  grpc::Status Watch(const std::string& id, std::vector<v1::JobEvent>* events) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
    v1::WatchJobRequest req;
    req.set_id(id);
    auto reader = stub_->WatchJob(&ctx, req);
    v1::JobEvent ev;
    while (reader->Read(&ev)) events->push_back(ev);
    return reader->Finish();
  }
  // Polls until pred(job) or the deadline; returns the last job seen.
  v1::Job WaitFor(const std::string& id, absl::Duration limit,
                  const std::function<bool(const v1::Job&)>& pred) {
    const absl::Time deadline = absl::Now() + limit;
    v1::Job job;
    while (absl::Now() < deadline) {
      if (Get(id, &job).ok() && pred(job)) return job;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return job;
  }
  int IdleWorkers() {
    v1::ListJobsResponse resp;
    if (!List(&resp).ok()) return -1;
    int idle = 0;
    for (const auto& w : resp.workers()) idle += w.state() == "idle";
    return idle;
  }

 private:
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

inline bool Terminal(const v1::Job& j) {
  return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED ||
         j.state() == v1::CANCELLED;
}

inline v1::JobSpec Spec(const std::string& strategy, const std::string& mode,
                 int workers) {
  v1::JobSpec s;
  s.set_strategy(*ParseStrategy(strategy));
  s.set_mode(*ParseSyncMode(mode));
  s.set_workers(workers);
  s.set_batch_size(32);
  s.set_optimizer(v1::OPTIMIZER_ADAM);
  s.set_lr(0.001f);
  return s;
}

}  // namespace gradsync

#endif  // GRADSYNC_TESTS_INTEGRATION_CLUSTER_H_
