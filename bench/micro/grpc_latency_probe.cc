// How fast can a small allreduce go over gRPC on this machine, and does it
// matter who reads the frames? One process per rank; each runs recursive
// doubling (log2 N exchanges of the whole vector) `iters` times over gRPC
// streams, in one of two shapes:
//
//   --mode=push  the transport as it is (worker/collectives/transport/grpc):
//                the sender writes on a client stream (callback API), the
//                receiver's callback reactor puts frames in a mailbox and
//                wakes the collective thread (mutex + condition variable).
//   --mode=pull  the receiver opens a stream to each sender and reads it on
//                a completion queue that the collective thread itself polls
//                (AsyncNext); the sender writes on the server side of that
//                stream (callback API).
//
// Each timed allreduce starts after a 1-float allreduce (--barrier), and the
// parent prints the median, p10 and p90 of rank 0's time and of the slowest
// rank's per iteration (what `gradsync bench` reports). Every sum is checked;
// the parent kills the ranks and fails after --timeout_s. A probe for a design
// decision (docs/performance.md), not a test.
//
//   build/bench/grpc_latency_probe --ranks=4 --bytes=4096 --mode=pull
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"

ABSL_FLAG(int, ranks, 4, "processes (a power of two)");
ABSL_FLAG(int, bytes, 4096, "bytes per allreduce");
ABSL_FLAG(int, iters, 2000, "timed allreduces");
ABSL_FLAG(int, warmup, 200, "untimed allreduces first");
ABSL_FLAG(std::string, mode, "push", "push or pull (see the file comment)");
ABSL_FLAG(int, base_port, 29800, "rank r listens on 127.0.0.1:base_port+r");
ABSL_FLAG(int, timeout_s, 120,
          "kill every rank and fail after this many seconds (no hangs)");
ABSL_FLAG(bool, barrier, true,
          "start each timed allreduce after a 1-float allreduce on the same "
          "streams, as `gradsync bench` does");

namespace {

using Clock = std::chrono::steady_clock;

grpc::ByteBuffer ToBuffer(const std::vector<float>& v) {
  grpc::Slice s(v.data(), v.size() * sizeof(float));
  return grpc::ByteBuffer(&s, 1);
}

void AddFrom(const grpc::ByteBuffer& b, std::vector<float>& v) {
  std::vector<grpc::Slice> slices;
  (void)b.Dump(&slices);
  size_t off = 0;
  std::vector<float> tmp(v.size());
  for (const auto& s : slices) {
    std::memcpy(reinterpret_cast<char*>(tmp.data()) + off, s.begin(), s.size());
    off += s.size();
  }
  for (size_t i = 0; i < v.size(); ++i) v[i] += tmp[i];
}

// ---- push: frames land in a mailbox that the collective thread waits on.
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, std::deque<grpc::ByteBuffer>> q;
};

class PushReceiver : public grpc::ServerGenericBidiReactor {
 public:
  PushReceiver(Mailbox* box, int from) : box_(box), from_(from) { StartRead(&buf_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    {
      std::lock_guard<std::mutex> l(box_->mu);
      box_->q[from_].push_back(std::move(buf_));
    }
    box_->cv.notify_one();
    buf_.Clear();
    StartRead(&buf_);
  }
  void OnDone() override { delete this; }

 private:
  Mailbox* box_;
  int from_;
  grpc::ByteBuffer buf_;
};

// A server-side stream we write on (pull) or a client stream (push): one
// write in flight, the rest queued.
template <class Reactor>
class Writer : public Reactor {
 public:
  void Enqueue(grpc::ByteBuffer b) {
    std::lock_guard<std::mutex> l(mu_);
    q_.push_back(std::move(b));
    if (!writing_) {
      writing_ = true;
      this->StartWrite(&q_.front());
    }
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> l(mu_);
    q_.pop_front();
    if (ok && !q_.empty()) {
      this->StartWrite(&q_.front());
    } else {
      writing_ = false;
    }
  }

 protected:
  std::mutex mu_;
  std::deque<grpc::ByteBuffer> q_;
  bool writing_ = false;
};

class PushSender
    : public Writer<grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>> {
 public:
  void OnDone(const grpc::Status&) override {}
};

class PullServer : public Writer<grpc::ServerGenericBidiReactor> {
 public:
  void OnDone() override {}
  void OnCancel() override {}
};

struct Registry {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, PullServer*> to;  // subscriber rank -> stream we write on
};

class Service : public grpc::CallbackGenericService {
 public:
  Service(Mailbox* box, Registry* reg) : box_(box), reg_(reg) {}
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* ctx) override {
    int peer = -1;
    auto it = ctx->client_metadata().find("rank");
    if (it != ctx->client_metadata().end()) {
      peer = std::stoi(std::string(it->second.data(), it->second.size()));
    }
    if (ctx->method() == "/p/push") return new PushReceiver(box_, peer);
    auto* w = new PullServer();  // lives until the process exits
    {
      std::lock_guard<std::mutex> l(reg_->mu);
      reg_->to[peer] = w;
    }
    reg_->cv.notify_all();
    return w;
  }

 private:
  Mailbox* box_;
  Registry* reg_;
};

std::string TimesPath(int r) {
  return "/tmp/grpc_latency_probe." + std::to_string(absl::GetFlag(FLAGS_base_port)) +
         "." + std::to_string(r);
}

std::string Addr(int r) {
  return "127.0.0.1:" + std::to_string(absl::GetFlag(FLAGS_base_port) + r);
}

std::shared_ptr<grpc::Channel> Connect(int r) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto ch = grpc::CreateCustomChannel(Addr(r), grpc::InsecureChannelCredentials(), args);
  while (!ch->WaitForConnected(std::chrono::system_clock::now() +
                               std::chrono::milliseconds(200))) {
  }
  return ch;
}

int RunRank(int rank) {
  const int n = absl::GetFlag(FLAGS_ranks);
  const bool pull = absl::GetFlag(FLAGS_mode) == "pull";
  Mailbox box;
  Registry reg;
  Service svc(&box, &reg);
  grpc::ServerBuilder sb;
  sb.AddListeningPort(Addr(rank), grpc::InsecureServerCredentials());
  // A stale probe on the same port must make this one fail, not share it.
  sb.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  sb.RegisterCallbackGenericService(&svc);
  auto server = sb.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "rank %d: cannot listen on %s\n", rank, Addr(rank).c_str());
    std::_Exit(2);  // live streams: no destructors
  }

  std::vector<std::shared_ptr<grpc::Channel>> ch(n);
  std::vector<std::unique_ptr<grpc::GenericStub>> stub(n);
  std::vector<std::unique_ptr<grpc::ClientContext>> ctx(n);
  std::vector<std::unique_ptr<PushSender>> senders(n);
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<grpc::GenericClientAsyncReaderWriter>> rd(n);
  std::vector<grpc::ByteBuffer> rbuf(n);
  std::vector<bool> ready(n, false);
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    ch[p] = Connect(p);
    stub[p] = std::make_unique<grpc::GenericStub>(ch[p]);
    ctx[p] = std::make_unique<grpc::ClientContext>();
    ctx[p]->AddMetadata("rank", std::to_string(rank));
    if (!pull) {
      senders[p] = std::make_unique<PushSender>();
      stub[p]->PrepareBidiStreamingCall(ctx[p].get(), "/p/push", grpc::StubOptions(),
                                        senders[p].get());
      senders[p]->AddHold();
      senders[p]->StartCall();
    } else {
      rd[p] = stub[p]->PrepareCall(ctx[p].get(), "/p/sub", &cq);
      rd[p]->StartCall(reinterpret_cast<void*>(intptr_t{1000 + p}));
      void* tag;
      bool ok;
      // A peer that is ready may already send: keep its reads.
      while (cq.Next(&tag, &ok) && tag != reinterpret_cast<void*>(intptr_t{1000 + p})) {
        ready[static_cast<int>(reinterpret_cast<intptr_t>(tag))] = true;
      }
      rd[p]->Read(&rbuf[p], reinterpret_cast<void*>(intptr_t{p}));
    }
  }
  if (pull) {  // every peer subscribed to us
    std::unique_lock<std::mutex> l(reg.mu);
    reg.cv.wait(l, [&] { return static_cast<int>(reg.to.size()) == n - 1; });
  }

  auto send = [&](int p, const std::vector<float>& v) {
    if (pull) {
      PullServer* w;
      {
        std::lock_guard<std::mutex> l(reg.mu);
        w = reg.to[p];
      }
      w->Enqueue(ToBuffer(v));
    } else {
      senders[p]->Enqueue(ToBuffer(v));
    }
  };
  auto recv = [&](int p) -> grpc::ByteBuffer {
    if (pull) {
      while (!ready[p]) {
        void* tag;
        bool ok;
        if (!cq.Next(&tag, &ok) || !ok) {
          std::fprintf(stderr, "rank %d: read failed\n", rank);
          std::_Exit(1);
        }
        ready[static_cast<int>(reinterpret_cast<intptr_t>(tag))] = true;
      }
      ready[p] = false;
      grpc::ByteBuffer b = std::move(rbuf[p]);
      rbuf[p].Clear();
      rd[p]->Read(&rbuf[p], reinterpret_cast<void*>(intptr_t{p}));
      return b;
    }
    std::unique_lock<std::mutex> l(box.mu);
    box.cv.wait(l, [&] { return !box.q[p].empty(); });
    grpc::ByteBuffer b = std::move(box.q[p].front());
    box.q[p].pop_front();
    return b;
  };

  const size_t count = std::max(1, absl::GetFlag(FLAGS_bytes) / 4);
  std::vector<float> v(count);
  std::vector<double> times;
  const int warm = absl::GetFlag(FLAGS_warmup);
  const int iters = absl::GetFlag(FLAGS_iters);
  std::vector<float> one(1);
  for (int it = 0; it < warm + iters; ++it) {
    std::fill(v.begin(), v.end(), static_cast<float>(rank + 1));
    if (absl::GetFlag(FLAGS_barrier)) {
      for (int bit = 1; bit < n; bit <<= 1) {
        send(rank ^ bit, one);
        (void)recv(rank ^ bit);
      }
    }
    auto t0 = Clock::now();
    for (int bit = 1; bit < n; bit <<= 1) {
      const int partner = rank ^ bit;
      send(partner, v);
      AddFrom(recv(partner), v);
    }
    auto t1 = Clock::now();
    const float want = static_cast<float>(n * (n + 1) / 2);
    for (size_t i = 0; i < count; ++i) {
      if (v[i] != want) {
        std::fprintf(stderr, "rank %d: wrong sum %f at %zu (want %f)\n", rank, v[i], i,
                     want);
        std::_Exit(1);  // live streams: no destructors
      }
    }
    if (it >= warm) {
      times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  // Each rank hands its times to the parent through a pipe-free file.
  FILE* f = std::fopen(TimesPath(rank).c_str(), "wb");
  if (f == nullptr) std::_Exit(1);
  std::fwrite(times.data(), sizeof(double), times.size(), f);
  std::fclose(f);
  // Let every rank finish its last reads before anyone exits.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "grpc_latency_probe --ranks=4 --bytes=4096 --mode=push|pull");
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_ranks);
  if (n < 2 || (n & (n - 1)) != 0) {
    std::fprintf(stderr, "--ranks must be a power of two >= 2\n");
    return 2;
  }
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode != "push" && mode != "pull") {
    std::fprintf(stderr, "--mode: want push or pull\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_bytes) < 4 || absl::GetFlag(FLAGS_iters) < 1 ||
      absl::GetFlag(FLAGS_warmup) < 0 || absl::GetFlag(FLAGS_timeout_s) < 1) {
    std::fprintf(stderr,
                 "need --bytes >= 4, --iters >= 1, --warmup >= 0, "
                 "--timeout_s >= 1\n");
    return 2;
  }
  std::vector<pid_t> kids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) return RunRank(r);
    if (pid < 0) {
      std::perror("fork");
      for (pid_t k : kids) kill(k, SIGKILL);
      for (size_t i = 0; i < kids.size(); ++i) waitpid(-1, nullptr, 0);
      return 1;
    }
    kids.push_back(pid);
  }
  int rc = 0;
  const auto deadline =
      Clock::now() + std::chrono::seconds(absl::GetFlag(FLAGS_timeout_s));
  std::set<pid_t> live(kids.begin(), kids.end());
  while (!live.empty()) {
    int st = 0;
    const pid_t done = waitpid(-1, &st, WNOHANG);
    if (done > 0) {
      live.erase(done);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
    }
    // A rank that failed leaves its peers waiting: end them now.
    if (!live.empty() && (rc != 0 || Clock::now() > deadline)) {
      if (rc == 0) {
        std::fprintf(stderr, "timed out after %d s; killing the ranks\n",
                     absl::GetFlag(FLAGS_timeout_s));
      } else {
        std::fprintf(stderr, "a rank failed; killing the others\n");
      }
      for (pid_t k : live) kill(k, SIGKILL);
      for (pid_t k : live) waitpid(k, &st, 0);
      return 1;
    }
    if (done <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (rc != 0) return rc;
  // Per iteration: rank 0's time and the slowest rank's.
  const size_t iters = static_cast<size_t>(absl::GetFlag(FLAGS_iters));
  std::vector<double> own(iters), slowest(iters, 0);
  for (int r = 0; r < n; ++r) {
    std::vector<double> t(iters);
    FILE* f = std::fopen(TimesPath(r).c_str(), "rb");
    if (f == nullptr || std::fread(t.data(), sizeof(double), iters, f) != iters) {
      std::fprintf(stderr, "rank %d left no times\n", r);
      return 1;
    }
    std::fclose(f);
    std::remove(TimesPath(r).c_str());
    if (r == 0) own = t;
    for (size_t i = 0; i < iters; ++i) slowest[i] = std::max(slowest[i], t[i]);
  }
  std::sort(own.begin(), own.end());
  std::sort(slowest.begin(), slowest.end());
  std::printf(
      "mode=%s ranks=%d bytes=%d barrier=%d: rank 0 median %.1f us "
      "(p10 %.1f, p90 %.1f); slowest rank median %.1f us (p10 %.1f, p90 "
      "%.1f)\n",
      absl::GetFlag(FLAGS_mode).c_str(), n, absl::GetFlag(FLAGS_bytes),
      absl::GetFlag(FLAGS_barrier) ? 1 : 0, own[iters / 2], own[iters / 10],
      own[iters * 9 / 10], slowest[iters / 2], slowest[iters / 10],
      slowest[iters * 9 / 10]);
  return 0;
}
