// The cluster token and mutual TLS on real daemons: strangers are refused
// UNAUTHENTICATED by every service (Coordinator, ParameterServer on the
// server and on a --role=ps shard, Peer on a worker) before any handler runs;
// members train; daemons without a token do not start; with TLS a plaintext
// client gets nowhere. (The refusal counter: metrics_integration_test.cc.)
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/security.h"
#include "tests/integration/cluster_fixture.h"

#ifndef GRADSYNC_SOURCE_DIR
#error "GRADSYNC_SOURCE_DIR must point at the source tree (deploy/make-dev-certs.sh)"
#endif

namespace gradsync {
namespace {

constexpr char kWrongToken[] = "0123456789abcdef-not-the-token";

grpc::ClientContext* Within5s(grpc::ClientContext* ctx) {
  ctx->set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
  return ctx;
}

std::shared_ptr<grpc::Channel> Dial(const std::string& target,
                                    const ClusterSecurity& security) {
  return MakeSecureChannel(target, DefaultChannelArgs(/*own_connection=*/true), security);
}

// One call of each Coordinator method a stranger would want, by name.
std::map<std::string, grpc::Status> ProbeCoordinator(
    const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::Coordinator::NewStub(channel);
  std::map<std::string, grpc::Status> out;
  grpc::ClientContext c1, c2, c3, c4, c5, c6;
  v1::Job job;
  v1::ListJobsResponse list;
  out["ListJobs"] = stub->ListJobs(Within5s(&c1), v1::ListJobsRequest(), &list);
  v1::SubmitJobRequest submit;
  // Invalid (batch 0): a member's call then ends INVALID_ARGUMENT in the
  // handler instead of starting a job.
  *submit.mutable_spec() = Spec("ring", "sync", 1);
  submit.mutable_spec()->set_batch_size(0);
  out["SubmitJob"] = stub->SubmitJob(Within5s(&c2), submit, &job);
  v1::CancelJobRequest cancel;
  cancel.set_id("j-1");
  out["CancelJob"] = stub->CancelJob(Within5s(&c3), cancel, &job);
  v1::GetJobRequest get;
  get.set_id("j-1");
  out["GetJob"] = stub->GetJob(Within5s(&c4), get, &job);
  v1::WatchJobRequest watch;
  watch.set_id("j-1");
  auto reader = stub->WatchJob(Within5s(&c5), watch);
  v1::JobEvent event;
  while (reader->Read(&event)) {
  }
  out["WatchJob"] = reader->Finish();
  auto join = stub->Join(Within5s(&c6));
  v1::CoordinatorMessage m;
  while (join->Read(&m)) {
  }
  out["Join"] = join->Finish();
  return out;
}

std::map<std::string, grpc::Status> ProbeParameterServer(
    const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::ParameterServer::NewStub(channel);
  std::map<std::string, grpc::Status> out;
  grpc::ClientContext c1, c2;
  v1::TensorFrame frame;
  out["Pull"] = stub->Pull(Within5s(&c1), v1::TensorFrame(), &frame);
  v1::CheckpointsResponse checkpoints;
  out["Checkpoints"] =
      stub->Checkpoints(Within5s(&c2), v1::CheckpointsRequest(), &checkpoints);
  return out;
}

std::map<std::string, grpc::Status> ProbePeer(
    const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::Peer::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->Stream(Within5s(&ctx));
  v1::StreamAck ack;
  while (stream->Read(&ack)) {
  }
  return {{"Stream", stream->Finish()}};
}

// Every probe of every service of `c`, with `security` as the caller's.
std::map<std::string, grpc::Status> ProbeAll(Cluster& c,
                                             const ClusterSecurity& security) {
  std::map<std::string, grpc::Status> out;
  auto add = [&out](const std::string& where,
                    const std::map<std::string, grpc::Status>& some) {
    for (const auto& [name, st] : some) out[absl::StrCat(where, " ", name)] = st;
  };
  add("coordinator", ProbeCoordinator(Dial(c->coordinator(), security)));
  add("server PS", ProbeParameterServer(Dial(c->coordinator(), security)));
  add("shard PS", ProbeParameterServer(Dial(c->shards()[0].address, security)));
  add("worker Peer", ProbePeer(Dial(c->workers()[0].address, security)));
  return out;
}

void ExpectAllRefused(const std::map<std::string, grpc::Status>& probes) {
  EXPECT_EQ(probes.size(), 11u);
  for (const auto& [name, st] : probes) {
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << name << ": " << st.error_code() << " " << st.error_message();
    EXPECT_EQ(st.error_message(), kRefusalMessage) << name;
  }
}

TEST(Auth, StrangersAreRefusedAtEveryServiceAndMembersTrain) {
  Cluster c(2, /*shards=*/2);
  ASSERT_TRUE(c.ok());
  ExpectAllRefused(ProbeAll(c, ClusterSecurity()));  // no token
  ClusterSecurity wrong;
  wrong.token = kWrongToken;
  ExpectAllRefused(ProbeAll(c, wrong));
  // With the token every call reaches its handler (which answers on its own
  // terms), and a job runs to the end.
  for (const auto& [name, st] : ProbeAll(c, c->client_security())) {
    EXPECT_NE(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << name;
  }
  v1::Job job;
  v1::JobSpec spec = Spec("ps", "sync", 2);
  spec.set_steps(20);
  spec.set_ps_shards(2);
  ASSERT_TRUE(c.Submit(spec, &job).ok());
  v1::Job done = c.WaitFor(job.id(), absl::Seconds(120), Terminal);
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.error();
}

// Runs `daemon` (a binary in GRADSYNC_BIN_DIR and its flags, after `flags`)
// without $GRADSYNC_TOKEN for at most `timeout_s`; its exit code, and stderr
// in *err.
int RunWithoutEnvToken(const std::string& daemon, const std::string& flags, int timeout_s,
                       std::string* err) {
  const std::string dir = TempDir();
  const int rc = Shell(absl::StrCat("env -u GRADSYNC_TOKEN ", GRADSYNC_BIN_DIR, "/",
                                    daemon, " ", flags, " > /dev/null 2> ", dir, "/err"),
                       timeout_s);
  *err = Slurp(dir + "/err");
  return rc;
}

TEST(Auth, DaemonsWithoutATokenRefuseToStart) {
  for (const std::string& daemon :
       {absl::StrCat("gradsync-server --listen=127.0.0.1:0 --state_dir=", TempDir()),
        std::string("gradsync-worker --coordinator=127.0.0.1:1")}) {
    SCOPED_TRACE(daemon);
    std::string err;
    EXPECT_EQ(RunWithoutEnvToken(daemon, "", 30, &err), 2);
    EXPECT_TRUE(absl::StrContains(err, "no cluster token")) << err;
    EXPECT_EQ(RunWithoutEnvToken(daemon, "--auth=maybe", 30, &err), 2);
    EXPECT_TRUE(absl::StrContains(err, "--auth must be")) << err;
    // The explicit opt-out starts (and runs until `timeout` stops it),
    // warning loudly.
    EXPECT_EQ(RunWithoutEnvToken(daemon, "--auth=none", 3, &err), 124);
    EXPECT_TRUE(absl::StrContains(err, "NO AUTHENTICATION")) << err;
    // The daemons spell their flags as the CLI does: --token-file is
    // --token_file (a missing file is its error, not an unknown flag).
    EXPECT_EQ(RunWithoutEnvToken(daemon, "--token-file=/nonexistent/token", 30, &err), 2);
    EXPECT_TRUE(absl::StrContains(err, "--token_file: ")) << err;
    EXPECT_FALSE(absl::StrContains(err, "Unknown command line flag")) << err;
  }
}

TEST(Auth, CliTakesTheTokenFromItsFileOrTheEnvironmentFileFirst) {
  Cluster c(1);
  ASSERT_TRUE(c.ok());
  const std::string dir = TempDir();
  const std::string list =
      absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync list --server=", c->coordinator());
  const std::string env =
      absl::StrCat("env GRADSYNC_TOKEN=$(cat ", c->token_file(), ") ");
  EXPECT_EQ(Shell(absl::StrCat(env, list, " > /dev/null"), 30), 0);
  EXPECT_EQ(
      Shell(absl::StrCat(list, " --token-file=", c->token_file(), " > /dev/null"), 30),
      0);
  EXPECT_EQ(Shell(absl::StrCat("env -u GRADSYNC_TOKEN ", list, " 2> ", dir, "/err"), 30),
            1);
  EXPECT_TRUE(absl::StrContains(Slurp(dir + "/err"), "UNAUTHENTICATED"))
      << Slurp(dir + "/err");
  // A file with a wrong token wins over a right environment variable.
  Shell(absl::StrCat("echo ", kWrongToken, " > ", dir, "/wrong"), 10);
  EXPECT_EQ(
      Shell(absl::StrCat(env, list, " --token_file=", dir, "/wrong 2> /dev/null"), 30),
      1);
}

TEST(Auth, MutualTlsClusterTrainsAndRefusesPlaintext) {
  const std::string certs = TempDir() + "/certs";
  ASSERT_EQ(Shell(absl::StrCat("bash ", GRADSYNC_SOURCE_DIR, "/deploy/make-dev-certs.sh ",
                               certs, " > /dev/null"),
                  60),
            0);
  Cluster c(2, /*shards=*/2, /*metrics=*/false, /*heartbeat_timeout=*/6.0, certs);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->client_security().tls());
  v1::Job job;
  ASSERT_TRUE(c.Submit(Spec("ring", "sync", 2), &job).ok());
  v1::Job done = c.WaitFor(job.id(), absl::Seconds(120), Terminal);
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  // Plaintext with the right token: no TLS handshake, no call.
  ClusterSecurity plaintext;
  plaintext.token = c->client_security().token;
  for (const auto& [name, st] : ProbeAll(c, plaintext)) {
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE)
        << name << ": " << st.error_message();
  }
  // TLS with a cluster certificate but without the token: still refused.
  ClusterSecurity no_token = c->client_security();
  no_token.token.clear();
  ExpectAllRefused(ProbeAll(c, no_token));
}

}  // namespace
}  // namespace gradsync
