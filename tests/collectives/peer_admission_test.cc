// Admission of Peer streams (peer_mailboxes.h): a stream is admitted only
// into a job this worker runs, with the job's secret and one of its ranks;
// streams for jobs not opened yet wait (bounded in number and time) and are
// then refused; frames naming another job or rank than their stream end it
// undelivered. Unit tests on PeerMailboxes, then real streams on loopback.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/job_secret.h"
#include "common/testing/fake_env.h"
#include "gradsync/v1/gradsync.grpc.pb.h"
#include "worker/collectives/transport/grpc/grpc_transport.h"

namespace gradsync {
namespace {

// Collects admission answers.
struct Answers {
  absl::Mutex mu;
  std::vector<absl::Status> got ABSL_GUARDED_BY(mu);
  AdmitFn Make() {
    return [this](absl::StatusOr<std::shared_ptr<JobMailbox>> b) {
      absl::MutexLock lock(&mu);
      got.push_back(b.ok() ? absl::OkStatus() : b.status());
    };
  }
  std::vector<absl::Status> Take() {
    absl::MutexLock lock(&mu);
    return got;
  }
};

TEST(PeerMailboxes, StreamsWaitForTheirJobAndOnlyMembersAreAdmitted) {
  PeerMailboxes boxes;
  Answers a;
  boxes.Admit({"j", 1, "s3cret"}, a.Make());
  boxes.Admit({"j", 0, "guess"}, a.Make());
  boxes.Admit({"j", 2, "s3cret"}, a.Make());  // world is 2
  EXPECT_EQ(boxes.waiting(), 3u);
  EXPECT_TRUE(a.Take().empty());  // nothing answered, nothing read yet
  boxes.Open("j", "s3cret", 2);
  EXPECT_EQ(boxes.waiting(), 0u);
  std::vector<absl::Status> got = a.Take();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].ok()) << got[0];
  EXPECT_EQ(got[1].code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(got[2].code(), absl::StatusCode::kPermissionDenied);
  // Once open: answered at once.
  Answers b;
  boxes.Admit({"j", 0, "s3cret"}, b.Make());
  boxes.Admit({"j", -1, "s3cret"}, b.Make());
  got = b.Take();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].ok());
  EXPECT_EQ(got[1].code(), absl::StatusCode::kPermissionDenied);
  // Ended: refused.
  boxes.Close("j", absl::AbortedError("job ended"));
  Answers c;
  boxes.Admit({"j", 0, "s3cret"}, c.Make());
  got = c.Take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PeerMailboxes, WaitingStreamsAreBoundedInNumberAndTime) {
  FakeEnv env;
  PeerMailboxes boxes(&env);
  Answers a;
  for (size_t i = 0; i < kMaxWaitingStreams; ++i) {
    boxes.Admit({"ghost-" + std::to_string(i % 7), 0, "x"}, a.Make());
  }
  EXPECT_EQ(boxes.waiting(), kMaxWaitingStreams);
  Answers over;
  boxes.Admit({"ghost-x", 0, "x"}, over.Make());
  ASSERT_EQ(over.Take().size(), 1u);
  EXPECT_EQ(over.Take()[0].code(), absl::StatusCode::kResourceExhausted);
  // Closing a job refuses its waiting streams at once.
  boxes.Close("ghost-0", absl::CancelledError("cancelled"));
  EXPECT_LT(boxes.waiting(), kMaxWaitingStreams);
  // The rest are refused after kAdmitWait on the Env's clock (bounded: never
  // kept), and not before: the reaper (every 200 ms of real time) finds
  // none overdue until the clock says so.
  const size_t left = boxes.waiting();
  env.Advance(kAdmitWait - absl::Milliseconds(1));
  absl::SleepFor(absl::Milliseconds(500));  // two reaper periods: none expire
  EXPECT_EQ(boxes.waiting(), left);
  env.Advance(absl::Milliseconds(1));
  // Poll (real time) for the reaper's next pass; the bound only stops a
  // broken build from hanging.
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (boxes.waiting() > 0 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(boxes.waiting(), 0u);
  std::vector<absl::Status> got = a.Take();
  ASSERT_EQ(got.size(), kMaxWaitingStreams);
  int not_found = 0;
  for (const absl::Status& st : got) not_found += absl::IsNotFound(st);
  EXPECT_GT(not_found, 0);
}

// A worker's Peer server with job "j" (2 ranks, secret "s3cret") open.
struct PeerServer {
  PeerMailboxes mailboxes;
  PeerService service{&mailboxes};
  std::unique_ptr<grpc::Server> server;
  std::string address;
  std::shared_ptr<JobMailbox> box;
};

std::unique_ptr<PeerServer> StartPeer() {
  auto s = std::make_unique<PeerServer>();
  auto started = StartServer("127.0.0.1:0", {&s->service});
  EXPECT_TRUE(started.ok()) << started.status();
  s->server = std::move(started->server);
  s->address = LocalAddress("127.0.0.1:0", started->port);
  s->box = s->mailboxes.Open("j", "s3cret", 2);
  return s;
}

// Opens a raw Peer stream with `creds`, writes one frame whose header names
// `header_job` / `header_rank`, and returns how the server ended the call.
grpc::Status RawStream(const std::string& address, const PeerCredentials& creds,
                       const std::string& header_job, int header_rank) {
  auto stub = v1::Peer::NewStub(MakeChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + kAdmitWait + absl::Seconds(10)));
  ctx.AddMetadata(kJobIdMetadata, creds.job_id);
  ctx.AddMetadata(kJobRankMetadata, std::to_string(creds.rank));
  ctx.AddMetadata(kJobSecretMetadata, creds.secret);
  auto stream = stub->Stream(&ctx);
  v1::TensorFrame f;
  f.mutable_header()->set_kind(TensorHeader::CHUNK);
  f.mutable_header()->set_job_id(header_job);
  f.mutable_header()->set_rank(header_rank);
  f.mutable_header()->set_count(4);
  f.set_data(std::string(16, '\0'));
  stream->Write(f);
  stream->WritesDone();
  v1::StreamAck ack;
  while (stream->Read(&ack)) {
  }
  return stream->Finish();
}

TEST(PeerService, OutsidersCannotOpenAStreamOrDeliverAFrame) {
  auto peer = StartPeer();
  // Wrong secret, or a rank outside the job: refused at open.
  EXPECT_EQ(RawStream(peer->address, {"j", 1, "guess"}, "j", 1).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(RawStream(peer->address, {"j", 5, "s3cret"}, "j", 5).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // No credentials at all.
  EXPECT_EQ(RawStream(peer->address, {"", -1, ""}, "j", 1).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // A member's stream whose frame names another rank: ended, not delivered.
  EXPECT_EQ(RawStream(peer->address, {"j", 1, "s3cret"}, "j", 0).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Nothing reached the job, and the job is not failed.
  for (int src : {0, 1}) {
    auto f = peer->box->Pop(src, 0, absl::Now() + absl::Milliseconds(200));
    EXPECT_EQ(f.status().code(), absl::StatusCode::kDeadlineExceeded) << f.status();
  }
  // A member's well-formed frame is delivered.
  EXPECT_TRUE(RawStream(peer->address, {"j", 1, "s3cret"}, "j", 1).ok());
  auto f = peer->box->Pop(1, 0, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->count(), 4u);
  peer->server->Shutdown(ToChrono(absl::Now() + absl::Seconds(1)));
}

TEST(PeerService, AFrameForAnUnknownJobIsRefusedAndNothingIsStored) {
  auto peer = StartPeer();
  const absl::Time t0 = absl::Now();
  grpc::Status st = RawStream(peer->address, {"never", 0, "x"}, "never", 0);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_GE(absl::Now() - t0, kAdmitWait - absl::Milliseconds(100));
  EXPECT_EQ(peer->mailboxes.waiting(), 0u);
  peer->server->Shutdown(ToChrono(absl::Now() + absl::Seconds(1)));
}

}  // namespace
}  // namespace gradsync
