// The coordinator bounds its open Join and WatchJob streams (each holds
// threads): beyond CoordinatorOptions::max_streams a new one gets
// RESOURCE_EXHAUSTED, and a slot is free again once a stream ends. A real
// gRPC server on loopback in this process; every call has a deadline.
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "common/content_store.h"
#include "common/grpc/grpc_util.h"
#include "server/coordinator/coordinator.h"
#include "tests/server/job_table_test_util.h"

namespace gradsync {
namespace {

using Watch = grpc::ClientReader<v1::JobEvent>;

struct OpenWatch {
  grpc::ClientContext ctx;
  std::unique_ptr<Watch> reader;
};

// Opens WatchJob(id) and reads its first event; false when the stream ended.
bool StartWatch(v1::Coordinator::Stub* stub, const std::string& id, OpenWatch* w) {
  w->ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(20)));
  v1::WatchJobRequest req;
  req.set_id(id);
  w->reader = stub->WatchJob(&w->ctx, req);
  v1::JobEvent ev;
  return w->reader->Read(&ev);
}

TEST(CoordinatorStreams, StreamsBeyondTheLimitGetResourceExhausted) {
  CoordinatorOptions o;
  o.max_streams = 2;
  Coordinator coordinator(o);
  absl::StatusOr<StartedServer> server = StartServer("127.0.0.1:0", {&coordinator});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub =
      v1::Coordinator::NewStub(MakeChannel(LocalAddress("127.0.0.1:0", server->port)));
  // No workers: a two-worker job stays queued, its watchers stay open.
  v1::Job job;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec(v1::STRATEGY_ALLREDUCE, 2);
    ASSERT_TRUE(stub->SubmitJob(&ctx, req, &job).ok());
  }
  std::vector<std::unique_ptr<OpenWatch>> open;
  for (int i = 0; i < 2; ++i) {
    open.push_back(std::make_unique<OpenWatch>());
    ASSERT_TRUE(StartWatch(stub.get(), job.id(), open.back().get()));
  }
  OpenWatch refused;
  EXPECT_FALSE(StartWatch(stub.get(), job.id(), &refused));
  const grpc::Status st = refused.reader->Finish();
  EXPECT_EQ(st.error_code(), grpc::RESOURCE_EXHAUSTED) << st.error_message();
  // Cancelling the job ends both watches; their slots are free again.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
    v1::CancelJobRequest req;
    req.set_id(job.id());
    v1::Job cancelled;
    ASSERT_TRUE(stub->CancelJob(&ctx, req, &cancelled).ok());
  }
  for (auto& w : open) {
    v1::JobEvent ev;
    while (w->reader->Read(&ev)) {
    }
    EXPECT_TRUE(w->reader->Finish().ok());
  }
  OpenWatch again;
  EXPECT_TRUE(StartWatch(stub.get(), job.id(), &again));
  v1::JobEvent ev;
  while (again.reader->Read(&ev)) {
  }
  EXPECT_TRUE(again.reader->Finish().ok());
  coordinator.Shutdown();
  server->server->Shutdown(ToChrono(absl::Now() + absl::Seconds(5)));
}

// Issue 51: idle uploads held Join's slots, so workers could not register,
// and were never timed out. Blob streams now have slots of their own, and
// one that sends nothing is cancelled after blob_idle_timeout.
TEST(CoordinatorStreams, UploadsHaveSlotsOfTheirOwnAndAnIdleOneIsCancelled) {
  char tmpl[] = "/tmp/gradsync-blobs-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  absl::StatusOr<std::unique_ptr<ContentStore>> blobs = ContentStore::Open(tmpl);
  ASSERT_TRUE(blobs.ok()) << blobs.status();
  CoordinatorOptions o;
  o.max_streams = 1;
  o.max_blob_streams = 1;
  o.blob_idle_timeout = absl::Seconds(1);
  o.blobs = blobs->get();
  Coordinator coordinator(o);
  absl::StatusOr<StartedServer> server = StartServer("127.0.0.1:0", {&coordinator});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub =
      v1::Coordinator::NewStub(MakeChannel(LocalAddress("127.0.0.1:0", server->port)));
  // An upload that sends nothing holds the one blob slot: a second is refused
  // (once the first's handler runs), naming the flag.
  grpc::ClientContext idle_ctx;
  idle_ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(30)));
  v1::BlobInfo idle_info;
  std::unique_ptr<grpc::ClientWriter<v1::BlobChunk>> idle =
      stub->PutBlob(&idle_ctx, &idle_info);
  grpc::Status second;
  for (int i = 0; i < 100 && second.error_code() != grpc::RESOURCE_EXHAUSTED; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
    v1::BlobInfo info;
    auto w = stub->PutBlob(&ctx, &info);
    w->WritesDone();
    second = w->Finish();
    if (second.error_code() != grpc::RESOURCE_EXHAUSTED) {
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  EXPECT_EQ(second.error_code(), grpc::RESOURCE_EXHAUSTED) << second.error_message();
  EXPECT_NE(second.error_message().find("--max_blob_streams"), std::string::npos);
  // The one Join/WatchJob slot is still free: a watch opens.
  v1::Job job;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec(v1::STRATEGY_ALLREDUCE, 2);
    ASSERT_TRUE(stub->SubmitJob(&ctx, req, &job).ok());
  }
  OpenWatch watch;
  EXPECT_TRUE(StartWatch(stub.get(), job.id(), &watch));
  // The idle upload is cancelled by the server (the monitor's next look
  // after a second), long before its own 30 s deadline.
  const grpc::Status ended = idle->Finish();
  EXPECT_EQ(ended.error_code(), grpc::CANCELLED) << ended.error_message();
  watch.ctx.TryCancel();
  coordinator.Shutdown();
  server->server->Shutdown(ToChrono(absl::Now() + absl::Seconds(5)));
}

// Issue 51, finding 10: blobs had no total quota and could fill the disk
// that jobs.db needs. An upload past --max_blobs_total_bytes is refused
// naming that flag, whether its size is announced or only streamed; one
// that would leave less than --blob_disk_reserve_bytes free is refused
// naming that one. Nothing of a refused upload is kept.
TEST(CoordinatorStreams, UploadsStayWithinTheBlobQuotaAndTheDiskReserve) {
  char tmpl[] = "/tmp/gradsync-blobs-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  absl::StatusOr<std::unique_ptr<ContentStore>> blobs = ContentStore::Open(tmpl);
  ASSERT_TRUE(blobs.ok()) << blobs.status();
  CoordinatorOptions o;
  o.blobs = blobs->get();
  o.max_blobs_total_bytes = 25000;
  o.blob_disk_reserve_bytes = 0;
  auto coordinator = std::make_unique<Coordinator>(o);
  absl::StatusOr<StartedServer> server = StartServer("127.0.0.1:0", {coordinator.get()});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub =
      v1::Coordinator::NewStub(MakeChannel(LocalAddress("127.0.0.1:0", server->port)));
  // Uploads `bytes` of `fill` in 4 kB chunks, announcing the size or not.
  auto put = [&](int bytes, char fill, bool announce) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(10)));
    v1::BlobInfo info;
    auto w = stub->PutBlob(&ctx, &info);
    const std::string all(bytes, fill);
    for (int at = 0; at < bytes; at += 4000) {
      v1::BlobChunk chunk;
      chunk.set_data(all.substr(at, 4000));
      if (at == 0 && announce) {
        chunk.set_sha256(Sha256Hex(all));
        chunk.set_size(bytes);
      }
      if (!w->Write(chunk)) break;
    }
    w->WritesDone();
    return w->Finish();
  };
  auto stored = [&] {
    absl::StatusOr<ContentStore::Usage> u = (*blobs)->Measure();
    return u.ok() ? u->stored : ~uint64_t{0};
  };
  EXPECT_TRUE(put(20000, 'a', true).ok());
  EXPECT_EQ(stored(), 20000u);
  for (bool announce : {true, false}) {
    const grpc::Status st = put(8000, 'b', announce);
    EXPECT_EQ(st.error_code(), grpc::RESOURCE_EXHAUSTED) << st.error_message();
    EXPECT_NE(st.error_message().find("--max_blobs_total_bytes"), std::string::npos)
        << st.error_message();
    EXPECT_EQ(stored(), 20000u) << "a refused upload was kept";
  }
  EXPECT_TRUE(put(4000, 'c', false).ok()) << "what fits the quota is still taken";
  // The disk reserve: asking for all of the disk's free space leaves no room.
  coordinator->Shutdown();
  server->server->Shutdown(ToChrono(absl::Now() + absl::Seconds(5)));
  o.max_blobs_total_bytes = ~uint64_t{0};
  o.blob_disk_reserve_bytes = ~uint64_t{0} / 2;
  coordinator = std::make_unique<Coordinator>(o);
  server = StartServer("127.0.0.1:0", {coordinator.get()});
  ASSERT_TRUE(server.ok()) << server.status();
  stub = v1::Coordinator::NewStub(MakeChannel(LocalAddress("127.0.0.1:0", server->port)));
  const grpc::Status st = put(100, 'd', true);
  EXPECT_EQ(st.error_code(), grpc::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("--blob_disk_reserve_bytes"), std::string::npos)
      << st.error_message();
  coordinator->Shutdown();
  server->server->Shutdown(ToChrono(absl::Now() + absl::Seconds(5)));
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace gradsync
