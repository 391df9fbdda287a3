// SessionStream (worker/session_stream.h): the worker's callback-API session
// with the coordinator, against a fake Coordinator on loopback. Messages go
// both ways in order; the stream's end (the server's status, a cancel) ends
// Read, fails Write and comes back from Finish; nothing waits forever.
#include "worker/session_stream.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"

namespace gradsync {
namespace {

// Join answers each message with kRegistered naming its worker id, until
// the client goes away; a worker id "bye" makes it end the call with
// FAILED_PRECONDITION instead.
class FakeCoordinator final : public v1::Coordinator::Service {
 public:
  grpc::Status Join(grpc::ServerContext*,
                    grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>*
                        stream) override {
    v1::WorkerMessage in;
    while (stream->Read(&in)) {
      if (in.register_().worker_id() == "bye") {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "bye");
      }
      v1::CoordinatorMessage out;
      out.mutable_registered()->set_worker_id(in.register_().worker_id());
      if (!stream->Write(out)) break;
    }
    return grpc::Status::OK;
  }
};

v1::WorkerMessage Register(const std::string& id) {
  v1::WorkerMessage m;
  m.mutable_register_()->set_worker_id(id);
  return m;
}

class SessionStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<StartedServer> s = StartServer("127.0.0.1:0", {&service_});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(s->server);
    stub_ = v1::Coordinator::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", s->port)));
  }
  void TearDown() override {
    if (server_) server_->Shutdown(ToChrono(absl::Now() + absl::Seconds(1)));
  }

  FakeCoordinator service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

TEST_F(SessionStreamTest, MessagesGoBothWaysInOrderUntilCancelled) {
  grpc::ClientContext ctx;
  SessionStream stream(stub_.get(), &ctx);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(stream.Write(Register(absl::StrCat("w", i))));
  }
  for (int i = 0; i < 20; ++i) {
    v1::CoordinatorMessage m;
    ASSERT_TRUE(stream.Read(&m));
    ASSERT_EQ(m.msg_case(), v1::CoordinatorMessage::kRegistered);
    EXPECT_EQ(m.registered().worker_id(), absl::StrCat("w", i));
  }
  ctx.TryCancel();
  v1::CoordinatorMessage m;
  EXPECT_FALSE(stream.Read(&m));
  EXPECT_EQ(stream.Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_FALSE(stream.Write(Register("late")));
}

TEST_F(SessionStreamTest, TheServersStatusEndsReadsFailsWritesAndComesFromFinish) {
  grpc::ClientContext ctx;
  SessionStream stream(stub_.get(), &ctx);
  ASSERT_TRUE(stream.Write(Register("a")));
  v1::CoordinatorMessage m;
  ASSERT_TRUE(stream.Read(&m));
  EXPECT_EQ(m.registered().worker_id(), "a");
  ASSERT_TRUE(stream.Write(Register("bye")));
  EXPECT_FALSE(stream.Read(&m));
  // The call is over; a write fails instead of waiting.
  EXPECT_FALSE(stream.Write(Register("after")));
  const grpc::Status st = stream.Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(st.error_message(), "bye");
}

TEST_F(SessionStreamTest, DestroyingAnOpenStreamCancelsIt) {
  const absl::Time began = absl::Now();
  {
    grpc::ClientContext ctx;
    SessionStream stream(stub_.get(), &ctx);
    ASSERT_TRUE(stream.Write(Register("a")));
  }  // no Finish: the destructor cancels and waits for the end
  EXPECT_LT(absl::Now() - began, absl::Seconds(10));
}

TEST_F(SessionStreamTest, AnUnreachableCoordinatorEndsTheStream) {
  server_->Shutdown(ToChrono(absl::Now()));
  server_.reset();
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
  SessionStream stream(stub_.get(), &ctx);
  v1::CoordinatorMessage m;
  EXPECT_FALSE(stream.Read(&m));
  EXPECT_FALSE(stream.Finish().ok());
}

}  // namespace
}  // namespace gradsync
