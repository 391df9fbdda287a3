// Issue 9, bounded against hostile input, on real daemons over loopback:
// hostile and oversized frames get errors and leave the daemons' memory flat,
// a job naming a data directory the worker does not allow FAILS with
// PERMISSION_DENIED, and an exception in a job thread fails the job instead
// of the worker.
#include <cstdint>
#include <fstream>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/rpc_method.h>
#include <grpcpp/impl/codegen/sync_stream.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/security.h"
#include "common/message_limits.h"
#include "tests/integration/cluster_fixture.h"
#include "worker/worker_daemon.h"

namespace gradsync {
namespace {

// Resident memory of process `pid` in bytes (VmRSS); -1 when unreadable.
int64_t RssBytes(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      int64_t kb = -1;
      in >> kb;
      return kb * 1024;
    }
    std::getline(in, key);
  }
  return -1;
}

std::string Varint(uint64_t v) {
  uint8_t buf[10];
  const uint8_t* end =
      google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(v, buf);
  return std::string(reinterpret_cast<const char*>(buf), end - buf);
}

// A TensorFrame as bytes: field 1 the header, field 2 `data` whose length
// prefix says `data_len` (a lie when it differs from data.size()).
std::string FrameBytes(const TensorHeader& h, const std::string& data,
                       uint64_t data_len) {
  const std::string header = h.SerializeAsString();
  return absl::StrCat("\x0a", Varint(header.size()), header, "\x12", Varint(data_len),
                      data);
}

// Hostile frame number i: a header length of 2^62, a count of 2^62 with a
// few bytes, a count whose byte size wraps to 0, truncated data, and every
// 50th an oversized one (beyond kMaxMessageBytes).
std::string HostileFrame(int i) {
  TensorHeader h;
  h.set_kind(TensorHeader::GRAD);
  h.set_job_id(absl::StrCat("j-hostile-", i));
  h.set_step(1);
  if (i % 50 == 49) {
    h.set_count((kMaxMessageBytes + (4 << 20)) / 4);
    const std::string data(h.count() * 4, 'x');
    return FrameBytes(h, data, data.size());
  }
  switch (i % 4) {
    case 0:
      return absl::StrCat("\x0a", Varint(uint64_t{1} << 62), "abc");
    case 1:
      h.set_count(uint64_t{1} << 62);
      return FrameBytes(h, std::string(8, 'x'), 8);
    case 2:
      h.set_count(uint64_t{1} << 62);  // * 4 wraps to 0
      return FrameBytes(h, "", 0);
    default:
      h.set_count(1000);
      return FrameBytes(h, std::string(12, 'x'), 4000);
  }
}

grpc::ByteBuffer Buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// One unary call of the ParameterServer `method` with `bytes`.
grpc::Status PsCall(grpc::Channel* channel, const std::string& method,
                    const std::string& bytes) {
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
  grpc::ByteBuffer req = Buffer(bytes);
  grpc::ByteBuffer resp;
  return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel,
      grpc::internal::RpcMethod(
          absl::StrCat("/gradsync.v1.ParameterServer/", method).c_str(),
          grpc::internal::RpcMethod::NORMAL_RPC),
      &ctx, req, &resp);
}

// One Peer stream carrying `bytes` as its only frame.
grpc::Status PeerCall(grpc::Channel* channel, const std::string& bytes) {
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::
          Create(channel,
                 grpc::internal::RpcMethod("/gradsync.v1.Peer/Stream",
                                           grpc::internal::RpcMethod::BIDI_STREAMING),
                 &ctx));
  stream->Write(Buffer(bytes));
  stream->WritesDone();
  grpc::ByteBuffer ack;
  while (stream->Read(&ack)) {
  }
  return stream->Finish();
}

// Sends hostile frames [first, first + n) to the PS and the Peer service;
// each must be refused (oversized ones with RESOURCE_EXHAUSTED).
void SendHostile(grpc::Channel* ps, grpc::Channel* peer, int first, int n) {
  const char* const kMethods[] = {"PushPull", "Pull", "Init"};
  for (int i = first; i < first + n; ++i) {
    const std::string bytes = HostileFrame(i);
    const grpc::Status a = PsCall(ps, kMethods[i % 3], bytes);
    const grpc::Status b = PeerCall(peer, bytes);
    ASSERT_FALSE(a.ok()) << "PS accepted hostile frame " << i;
    ASSERT_FALSE(b.ok()) << "Peer accepted hostile frame " << i;
    if (bytes.size() > static_cast<size_t>(kMaxMessageBytes)) {
      EXPECT_EQ(a.error_code(), grpc::RESOURCE_EXHAUSTED) << a.error_message();
      EXPECT_EQ(b.error_code(), grpc::RESOURCE_EXHAUSTED) << b.error_message();
    }
  }
}

bool RunsAJob(Cluster* c, const std::string& strategy) {
  v1::JobSpec s = Spec(strategy, "sync", 2);
  s.set_steps(5);
  v1::Job job;
  if (!c->Submit(s, &job).ok()) return false;
  v1::Job done = c->WaitFor(job.id(), absl::Seconds(60), Terminal);
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << strategy << ": " << done.error();
  return done.state() == v1::SUCCEEDED;
}

TEST(Limits, HostileFramesGetErrorsAndLeaveMemoryFlat) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  const pid_t server = c->server().pid;
  const pid_t worker = c->workers()[0].pid;
  auto ps = c.RawChannel(c->coordinator());
  auto peer = c.RawChannel(c->workers()[0].address);
  // Warm-up: gRPC's own buffers and arenas reach their working size.
  SendHostile(ps.get(), peer.get(), 0, 100);
  const int64_t server_before = RssBytes(server);
  const int64_t worker_before = RssBytes(worker);
  // 400 frames, 8 of them oversized (52 MiB each way): a leak of 40 KiB a
  // frame would pass the bound.
  SendHostile(ps.get(), peer.get(), 100, 400);
  const int64_t server_growth = RssBytes(server) - server_before;
  const int64_t worker_growth = RssBytes(worker) - worker_before;
  std::printf(
      "VmRSS growth after 400 hostile frames: server %.1f MiB, "
      "worker %.1f MiB\n",
      server_growth / 1048576.0, worker_growth / 1048576.0);
  constexpr int64_t kBound = int64_t{16} << 20;
  EXPECT_LT(server_growth, kBound);
  EXPECT_LT(worker_growth, kBound);
  ASSERT_TRUE(c->CheckAlive().ok());
  EXPECT_TRUE(RunsAJob(&c, "ring"));
  EXPECT_TRUE(RunsAJob(&c, "ps"));
  v1::ListJobsResponse list;
  ASSERT_TRUE(c.List(&list).ok());
  ASSERT_EQ(list.jobs_size(), 2);
  std::printf("ListJobs: %zu bytes for 2 finished jobs\n", list.ByteSizeLong());
}

TEST(Limits, OversizedControlMessageIsRefusedAndTheServerStaysUp) {
  Cluster c(1);
  ASSERT_TRUE(c.ok());
  auto stub = v1::Coordinator::NewStub(c.RawChannel(c->coordinator()));
  grpc::ClientContext ctx;
  ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
  v1::SubmitJobRequest req;
  *req.mutable_spec() = Spec("ring", "sync", 1);
  req.mutable_spec()->set_name(std::string(kMaxMessageBytes + 1, 'n'));
  v1::Job job;
  const grpc::Status st = stub->SubmitJob(&ctx, req, &job);
  EXPECT_EQ(st.error_code(), grpc::RESOURCE_EXHAUSTED) << st.error_message();
  v1::ListJobsResponse list;
  ASSERT_TRUE(c.List(&list).ok());
  EXPECT_EQ(list.jobs_size(), 0);
  ASSERT_TRUE(c->CheckAlive().ok());
}

TEST(Limits, DataDirOutsideTheAllowListFailsWithPermissionDenied) {
  Cluster c(1);
  ASSERT_TRUE(c.ok());
  for (const std::string dir :
       {"/etc", "/usr/share/datasets/fashion-mnist/../../../../etc"}) {
    v1::JobSpec s = Spec("ring", "sync", 1);
    s.set_data_dir(dir);
    v1::Job job;
    ASSERT_TRUE(c.Submit(s, &job).ok());
    v1::Job failed = c.WaitFor(job.id(), absl::Seconds(20), Terminal);
    EXPECT_EQ(failed.state(), v1::FAILED);
    EXPECT_EQ(failed.error_code(), static_cast<int>(absl::StatusCode::kPermissionDenied))
        << failed.error();
    EXPECT_NE(failed.error().find("rank 0"), std::string::npos) << failed.error();
    EXPECT_NE(failed.error().find(dir), std::string::npos) << failed.error();
  }
}

// A worker in this process whose job thread throws on the first two jobs.
TEST(Limits, AnExceptionInAJobThreadFailsTheJobNotTheWorker) {
  Cluster c(0);
  ASSERT_TRUE(c.ok());
  // The worker's channels carry the cluster's token, as its main() would set
  // (each test runs in a process of its own under ctest).
  SetClusterSecurity(c->client_security());
  WorkerOptions o;
  o.coordinator = c->coordinator();
  o.listen = "127.0.0.1:0";
  o.id = "inproc";
  int jobs = 0;
  o.throw_in_job_for_test = [&jobs](const v1::Assignment&) {
    ++jobs;
    if (jobs == 1) throw std::bad_alloc();
    if (jobs == 2) throw std::length_error("vector too long");
  };
  WorkerDaemon daemon(o);
  ASSERT_TRUE(daemon.Start().ok());
  std::thread run([&daemon] { daemon.Run(); });
  const int want[] = {static_cast<int>(absl::StatusCode::kResourceExhausted),
                      static_cast<int>(absl::StatusCode::kInternal), 0};
  for (int code : want) {
    v1::JobSpec s = Spec("ring", "sync", 1);
    s.set_steps(3);
    v1::Job job;
    ASSERT_TRUE(c.Submit(s, &job).ok());
    v1::Job done = c.WaitFor(job.id(), absl::Seconds(30), Terminal);
    EXPECT_EQ(done.error_code(), code) << done.error();
    if (code != 0) {
      EXPECT_EQ(done.state(), v1::FAILED);
      EXPECT_NE(done.error().find("rank 0 on worker inproc"), std::string::npos)
          << done.error();
    } else {
      EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.error();
    }
  }
  daemon.Stop();
  run.join();
}

}  // namespace
}  // namespace gradsync
