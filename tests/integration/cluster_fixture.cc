#include "tests/integration/cluster_fixture.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/security.h"
#include "common/spec/job_spec.h"

namespace gradsync {
namespace {

grpc::ClientContext* WithDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
  return ctx;
}

}  // namespace

std::string TempDir() {
  char tmpl[] = "/tmp/gradsync-test-XXXXXX";
  return mkdtemp(tmpl);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Shell(const std::string& cmd, int timeout_s) {
  std::string full = absl::StrCat("timeout -k 5 ", timeout_s, " ", cmd);
  int rc = std::system(full.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

LocalClusterOptions Cluster::DefaultOptions(int workers) {
  LocalClusterOptions o;
  o.workers = workers;
  o.bin_dir = GRADSYNC_BIN_DIR;
  o.log_dir = TempDir();
  o.cache_dir = o.log_dir + "/cache";  // fetched models: this cluster's own
  o.log_level = "info";
  return o;
}

Cluster::Cluster(int workers, int shards, bool metrics, double heartbeat_timeout,
                 const std::string& tls_dir, int64_t ps_inline_bytes,
                 const std::vector<std::string>& server_flags)
    : Cluster([&] {
        LocalClusterOptions o = DefaultOptions(workers);
        o.server_flags = server_flags;
        o.ps_inline_bytes = ps_inline_bytes;
        o.tls_dir = tls_dir;
        o.heartbeat_timeout = heartbeat_timeout;
        o.ps_shards = shards;
        o.metrics = metrics;
        return o;
      }()) {}

Cluster::Cluster(const LocalClusterOptions& options) {
  auto c = LocalCluster::Start(options);
  EXPECT_TRUE(c.ok()) << c.status();
  if (c.ok()) cluster_ = std::move(*c);
  if (cluster_) {
    stub_ = v1::Coordinator::NewStub(Channel(cluster_->coordinator()));
  }
}

std::string Cluster::CliFlags() const {
  return absl::StrCat("--server=", cluster_->coordinator(),
                      " --token_file=", cluster_->token_file());
}

std::shared_ptr<grpc::Channel> Cluster::Channel(const std::string& target) const {
  return MakeSecureChannel(target, DefaultChannelArgs(), cluster_->client_security());
}

std::shared_ptr<grpc::Channel> Cluster::RawChannel(const std::string& target) const {
  grpc::ChannelArguments args = DefaultChannelArgs(/*own_connection=*/true);
  args.SetMaxSendMessageSize(-1);
  return MakeSecureChannel(target, args, cluster_->client_security());
}

grpc::Status Cluster::Submit(const v1::JobSpec& spec, v1::Job* job) {
  grpc::ClientContext ctx;
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  return stub_->SubmitJob(WithDeadline(&ctx), req, job);
}

grpc::Status Cluster::Get(const std::string& id, v1::Job* job) {
  grpc::ClientContext ctx;
  v1::GetJobRequest req;
  req.set_id(id);
  return stub_->GetJob(WithDeadline(&ctx), req, job);
}

grpc::Status Cluster::List(v1::ListJobsResponse* resp) {
  grpc::ClientContext ctx;
  return stub_->ListJobs(WithDeadline(&ctx), v1::ListJobsRequest(), resp);
}

grpc::Status Cluster::Cancel(const std::string& id, v1::Job* job) {
  grpc::ClientContext ctx;
  v1::CancelJobRequest req;
  req.set_id(id);
  return stub_->CancelJob(WithDeadline(&ctx), req, job);
}

grpc::Status Cluster::Watch(const std::string& id, std::vector<v1::JobEvent>* events) {
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
  v1::WatchJobRequest req;
  req.set_id(id);
  auto reader = stub_->WatchJob(&ctx, req);
  v1::JobEvent ev;
  while (reader->Read(&ev)) events->push_back(ev);
  return reader->Finish();
}

v1::Job Cluster::WaitFor(const std::string& id, absl::Duration limit,
                         const std::function<bool(const v1::Job&)>& pred) {
  const absl::Time deadline = absl::Now() + limit;
  v1::Job job;
  while (absl::Now() < deadline) {
    if (Get(id, &job).ok() && pred(job)) return job;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return job;
}

int Cluster::IdleWorkers() {
  v1::ListJobsResponse resp;
  if (!List(&resp).ok()) return -1;
  int idle = 0;
  for (const auto& w : resp.workers()) idle += w.state() == "idle";
  return idle;
}

bool Terminal(const v1::Job& j) {
  return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED ||
         j.state() == v1::CANCELLED;
}

v1::JobSpec Spec(const std::string& strategy, const std::string& mode, int workers) {
  v1::JobSpec s;
  s.set_strategy(*ParseStrategy(strategy));
  s.set_mode(*ParseSyncMode(mode));
  s.set_workers(workers);
  s.set_batch_size(32);
  s.set_optimizer(v1::OPTIMIZER_ADAM);
  s.set_lr(0.001f);
  return s;
}

std::string AutotunedAlgorithm(const std::string& out) {
  const std::string key = "allreduce jobs with --algorithm=auto run ";
  const size_t at = out.find(key);
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size();
  return out.substr(begin, out.find('\n', begin) - begin);
}

}  // namespace gradsync
