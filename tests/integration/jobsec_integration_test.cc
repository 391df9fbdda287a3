// The job-scoped data plane with real daemons on loopback (issue 9): a
// client that knows a running job's id, but is not a member of the job,
// cannot pull, push, end or list the checkpoints of a PS job, cannot open a
// Peer stream into a ring job or disturb it with a frame, and a fake worker
// cannot complete a job. Each job then SUCCEEDS as if nobody had tried.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/job_secret.h"
#include "common/grpc/security.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

// Submits `spec` and waits until it is running past step 5 (its PS slices
// installed, its ring streams open).
std::string StartJob(Cluster& c, v1::JobSpec spec) {
  spec.set_steps(400);
  v1::Job job;
  EXPECT_TRUE(c.Submit(spec, &job).ok());
  v1::Job running = c.WaitFor(job.id(), absl::Seconds(60), [](const v1::Job& j) {
    return Terminal(j) || (j.state() == v1::RUNNING && j.step() >= 5);
  });
  EXPECT_EQ(running.state(), v1::RUNNING) << running.error();
  return job.id();
}

void ExpectSucceeds(Cluster& c, const std::string& id) {
  v1::Job done = c.WaitFor(id, absl::Seconds(120), Terminal);
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.error();
}

// A frame of 4 floats for `key` as `rank`, as a member would send it.
v1::TensorFrame Frame(v1::TensorHeader::Kind kind, const std::string& key, int rank) {
  v1::TensorFrame f;
  f.mutable_header()->set_kind(kind);
  f.mutable_header()->set_job_id(key);
  f.mutable_header()->set_rank(rank);
  f.mutable_header()->set_count(4);
  f.set_data(std::string(16, '\0'));
  return f;
}

// A context with a deadline and, unless `secret` is empty, a claimed
// membership of a `world`-rank job.
std::unique_ptr<grpc::ClientContext> Ctx(const std::string& secret, int world = 2) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
  if (!secret.empty()) {
    ctx->AddMetadata(kJobWorldMetadata, std::to_string(world));
    ctx->AddMetadata(kJobSecretMetadata, secret);
    ctx->AddMetadata(kResumeWorldMetadata, std::to_string(world));
    ctx->AddMetadata(kResumeSecretMetadata, secret);
  }
  return ctx;
}

// The outsider of these tests holds the cluster token (MakeChannel of this
// process sends it): the job-scoped checks must stop a cluster member that
// is not a member of the job, not only strangers (auth_test.cc).
void ActAsATokenHolder(Cluster& c) { SetClusterSecurity(c->client_security()); }

// Every data-plane call on `shard` for job `id` (the push stream included),
// without and with a guessed secret: each PERMISSION_DENIED, and no answer
// says anything about the job.
void ExpectShardRefusesOutsider(const std::string& shard, const std::string& id) {
  auto stub = v1::ParameterServer::NewStub(MakeChannel(shard));
  const std::string guess(64, 'a');
  for (const std::string& secret : {std::string(), guess}) {
    SCOPED_TRACE(absl::StrCat(shard, secret.empty() ? " no secret" : " guessed"));
    const std::string key = absl::StrCat(id, "/p0");
    v1::TensorFrame out;
    std::vector<grpc::Status> got;
    got.push_back(
        stub->Pull(Ctx(secret).get(), Frame(v1::TensorHeader::PULL, key, 0), &out));
    got.push_back(
        stub->PushPull(Ctx(secret).get(), Frame(v1::TensorHeader::GRAD, key, 1), &out));
    got.push_back(stub->PushPull(Ctx(secret, 100).get(),
                                 Frame(v1::TensorHeader::GRAD, key, 50), &out));
    for (int rank : {1, 50}) {  // a member's rank, one past any world
      auto ctx = Ctx(secret, rank == 1 ? 2 : 100);
      auto stream = stub->PushPullStream(ctx.get());
      stream->Write(Frame(v1::TensorHeader::GRAD, key, rank));
      stream->WritesDone();
      while (stream->Read(&out)) ADD_FAILURE() << "an outsider's push was answered";
      got.push_back(stream->Finish());
    }
    v1::EndJobRequest end;
    end.set_job_id(id);
    end.set_reason("outsider");
    v1::EndJobResponse end_resp;
    got.push_back(stub->EndJob(Ctx(secret).get(), end, &end_resp));
    v1::CheckpointsRequest list;
    list.set_job_id(id);
    v1::CheckpointsResponse list_resp;
    got.push_back(stub->Checkpoints(Ctx(secret).get(), list, &list_resp));
    for (const grpc::Status& st : got) {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED)
          << st.error_message();
      EXPECT_EQ(st.error_message().find("step"), std::string::npos) << st.error_message();
    }
  }
}

// A --role=ps shard cannot learn the job key from anyone: without
// --job_key_file it would refuse every job, so it does not start at all.
TEST(JobSecurity, APsShardWithoutTheJobKeyRefusesToStart) {
  const std::string dir = TempDir();
  const std::string ps =
      absl::StrCat("env GRADSYNC_TOKEN=0123456789abcdef0123 ", GRADSYNC_BIN_DIR,
                   "/gradsync-server --role=ps --listen=127.0.0.1:0 --state_dir=", dir);
  EXPECT_EQ(Shell(absl::StrCat(ps, " > ", dir, "/out 2> ", dir, "/err"), 30), 2);
  const std::string err = Slurp(dir + "/err");
  EXPECT_EQ(err.rfind("gradsync-server: --job_key_file: required with --role=ps", 0), 0u)
      << err;
  EXPECT_EQ(Slurp(dir + "/out"), "");
  // With the key it starts (and runs until `timeout` stops it).
  ASSERT_TRUE(JobKey::WriteNewFile(dir + "/job.key").ok());
  EXPECT_EQ(
      Shell(absl::StrCat(ps, " --job_key_file=", dir, "/job.key > ", dir, "/out 2>&1"),
            3),
      124);
  EXPECT_NE(Slurp(dir + "/out").find("listening on"), std::string::npos)
      << Slurp(dir + "/out");
}

TEST(JobSecurity, AnOutsiderCannotPullPushEndOrListAPsJob) {
  Cluster c(2, /*shards=*/2);
  ASSERT_TRUE(c.ok());
  ActAsATokenHolder(c);
  v1::JobSpec spec = Spec("ps", "sync", 2);
  spec.set_ps_shards(2);
  const std::string id = StartJob(c, spec);
  ExpectShardRefusesOutsider(c->coordinator(), id);        // shard 0, in the server
  ExpectShardRefusesOutsider(c->shards()[0].address, id);  // --role=ps shard 1
  ExpectSucceeds(c, id);
}

// Opens a Peer stream to `address` presenting `secret` for `job` rank 0,
// writes one frame as that rank, then cancels the stream (before this
// change, a cancelled stream failed the job it named).
grpc::Status IntrudePeer(const std::string& address, const std::string& job,
                         const std::string& secret) {
  auto stub = v1::Peer::NewStub(MakeChannel(address));
  auto ctx = Ctx("");
  ctx->AddMetadata(kJobIdMetadata, job);
  ctx->AddMetadata(kJobRankMetadata, "0");
  if (!secret.empty()) ctx->AddMetadata(kJobSecretMetadata, secret);
  auto stream = stub->Stream(ctx.get());
  v1::TensorFrame f = Frame(v1::TensorHeader::CHUNK, job, 0);
  stream->Write(f);
  v1::StreamAck ack;
  while (stream->Read(&ack)) {
  }
  grpc::Status st = stream->Finish();
  // And one that is cut off while open.
  auto ctx2 = Ctx("");
  ctx2->AddMetadata(kJobIdMetadata, job);
  ctx2->AddMetadata(kJobRankMetadata, "1");
  ctx2->AddMetadata(kJobSecretMetadata, secret.empty() ? "x" : secret);
  auto cut = stub->Stream(ctx2.get());
  cut->Write(f);
  ctx2->TryCancel();
  cut->Finish().IgnoreError();
  return st;
}

TEST(JobSecurity, AnOutsiderCannotOpenAPeerStreamIntoARingJob) {
  Cluster c(3);
  ASSERT_TRUE(c.ok());
  ActAsATokenHolder(c);
  const std::string id = StartJob(c, Spec("ring", "sync", 3));
  v1::ListJobsResponse list;
  ASSERT_TRUE(c.List(&list).ok());
  for (const v1::WorkerInfo& w : list.workers()) {
    for (const std::string& secret : {std::string(), std::string(64, 'b')}) {
      grpc::Status st = IntrudePeer(w.peer_address(), id, secret);
      EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED)
          << w.id() << ": " << st.error_message();
    }
  }
  ExpectSucceeds(c, id);
}

int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// Refusals are logged with the caller's address, and a flood of them is
// cut by the refusal log's rate limit (common/grpc/refusal_log.h: 10 lines
// per 10 s; 200 refused calls on loopback take well under one window, at
// most a few).
TEST(JobSecurity, RefusalsAreLoggedWithTheCallersAddressAndRateLimited) {
  Cluster c(1);
  ASSERT_TRUE(c.ok());
  ActAsATokenHolder(c);
  constexpr int kCalls = 200;
  auto ps = v1::ParameterServer::NewStub(MakeChannel(c->coordinator()));
  auto peer = v1::Peer::NewStub(MakeChannel(c->workers()[0].address));
  for (int i = 0; i < kCalls; ++i) {
    v1::TensorFrame out;
    ASSERT_EQ(ps->Pull(Ctx("").get(), Frame(v1::TensorHeader::PULL, "j-9/p0", 0), &out)
                  .error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    auto ctx = Ctx("");  // a Peer stream without job, rank or secret
    ASSERT_EQ(peer->Stream(ctx.get())->Finish().error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  const int ps_lines =
      Occurrences(Slurp(c->server().log), "refused PS Pull from ipv4:127.0.0.1:");
  const int peer_lines = Occurrences(
      Slurp(c->workers()[0].log), "refused Peer stream of rank -1 from ipv4:127.0.0.1:");
  EXPECT_GE(ps_lines, 1) << Slurp(c->server().log);
  EXPECT_LE(ps_lines, 30);
  EXPECT_GE(peer_lines, 1) << Slurp(c->workers()[0].log);
  EXPECT_LE(peer_lines, 30);
}

// A Join session of a made-up worker.
class FakeWorker {
 public:
  FakeWorker(const std::string& coordinator, const std::string& id)
      : stub_(v1::Coordinator::NewStub(MakeChannel(coordinator))) {
    ctx_.set_deadline(ToChrono(absl::Now() + absl::Seconds(60)));
    stream_ = stub_->Join(&ctx_);
    v1::WorkerMessage reg;
    reg.mutable_register_()->set_worker_id(id);
    reg.mutable_register_()->set_peer_address("127.0.0.1:1");
    stream_->Write(reg);
  }
  ~FakeWorker() {
    ctx_.TryCancel();
    stream_->Finish().IgnoreError();
  }
  // The first message the coordinator answers with; false when the session
  // ended instead.
  bool Registered() {
    v1::CoordinatorMessage m;
    return stream_->Read(&m) && m.has_registered();
  }
  void Send(const v1::WorkerMessage& m) { stream_->Write(m); }

 private:
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>>
      stream_;
};

TEST(JobSecurity, AFakeWorkerCannotCompleteAJob) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  ActAsATokenHolder(c);
  const std::string id = StartJob(c, Spec("ps", "async", 2));
  // A second session under a live worker's id is refused.
  FakeWorker twin(c->coordinator(), "w0");
  EXPECT_FALSE(twin.Registered());
  FakeWorker fake(c->coordinator(), "fake");
  ASSERT_TRUE(fake.Registered());
  for (int rank : {0, 1}) {
    v1::WorkerMessage m;
    v1::WorkerMessage::JobDone* d = m.mutable_job_done();
    d->set_job_id(id);
    d->set_rank(rank);
    d->set_param_checksum("fake");
    d->set_steps(400);
    fake.Send(m);
  }
  // The fakes' JobDones are refused: the job is still running or has been
  // finished by the real workers (it is short: on an idle machine it may end
  // within the wait), never by the fake's checksums (checked below).
  absl::SleepFor(absl::Milliseconds(300));
  v1::Job job;
  ASSERT_TRUE(c.Get(id, &job).ok());
  EXPECT_TRUE(job.state() == v1::RUNNING || job.state() == v1::SUCCEEDED)
      << v1::JobState_Name(job.state()) << " " << job.error();
  v1::Job done = c.WaitFor(id, absl::Seconds(120), Terminal);
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.error();
  ASSERT_EQ(done.result().param_checksums_size(), 2);
  for (const std::string& sum : done.result().param_checksums()) {
    EXPECT_NE(sum, "fake");
  }
}

}  // namespace
}  // namespace gradsync
