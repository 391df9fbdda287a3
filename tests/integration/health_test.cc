// grpc.health.v1.Health on real gradsync-server / gradsync-worker processes
// (what Kubernetes' grpc readiness probes call, deploy/k8s/): the overall
// status "" is SERVING on every daemon, each server role names its services,
// and an unknown service is NOT_FOUND. The cluster is LocalCluster's (killed
// when the test ends, and with the test process).
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/local_cluster.h"
#include "common/grpc/grpc_util.h"
#include "grpc/health/v1/health.grpc.pb.h"

#ifndef GRADSYNC_BIN_DIR
#error "GRADSYNC_BIN_DIR must point at the directory of the built binaries"
#endif

namespace gradsync {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// Health/Check(service) against `target`, with a 5 s deadline.
grpc::Status Check(const std::string& target, const std::string& service,
                   HealthCheckResponse* response) {
  std::unique_ptr<Health::Stub> stub = Health::NewStub(MakeChannel(target));
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
  HealthCheckRequest req;
  req.set_service(service);
  return stub->Check(&ctx, req, response);
}

void ExpectServing(const std::string& target, const std::string& service) {
  HealthCheckResponse r;
  grpc::Status st = Check(target, service, &r);
  ASSERT_TRUE(st.ok()) << target << " '" << service << "': " << st.error_code() << " "
                       << st.error_message();
  EXPECT_EQ(r.status(), HealthCheckResponse::SERVING) << target << " '" << service << "'";
}

class HealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalClusterOptions o;
    o.workers = 2;
    o.ps_shards = 1;
    o.bin_dir = GRADSYNC_BIN_DIR;
    char tmpl[] = "/tmp/gradsync-health-XXXXXX";
    o.log_dir = mkdtemp(tmpl);
    absl::StatusOr<std::unique_ptr<LocalCluster>> c = LocalCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = *std::move(c);
  }
  void TearDown() override {
    if (cluster_) cluster_->Shutdown();
  }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(HealthTest, ServerIsServingOverallAndByService) {
  ExpectServing(cluster_->coordinator(), "");
  ExpectServing(cluster_->coordinator(), "gradsync.v1.Coordinator");
  // --role=all: this process is PS shard 0 as well.
  ExpectServing(cluster_->coordinator(), "gradsync.v1.ParameterServer");
}

TEST_F(HealthTest, WorkersAreServing) {
  ASSERT_EQ(cluster_->workers().size(), 2u);
  for (const LocalCluster::Process& w : cluster_->workers()) {
    ExpectServing(w.address, "");
  }
}

TEST_F(HealthTest, UnknownServiceIsNotFound) {
  HealthCheckResponse r;
  grpc::Status st = Check(cluster_->coordinator(), "no.such.Service", &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
}

}  // namespace
}  // namespace gradsync
