// Channels made by MakeChannel survive a slow connection handshake: a TCP
// proxy that holds every new connection for a while before it forwards the
// bytes stands in for a peer whose link is full or whose CPU is busy. The
// call must reach the server (which answers UNIMPLEMENTED for a method it
// does not know), not fail UNAVAILABLE at the first connection attempt.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/security.h"
#include "gradsync/v1/gradsync.grpc.pb.h"

namespace gradsync {
namespace {

// Accepts on 127.0.0.1:port(); each connection waits `hold` before the
// proxy dials `backend_port` and copies bytes both ways until either side
// closes.
class SlowProxy {
 public:
  SlowProxy(int backend_port, std::chrono::milliseconds hold)
      : backend_port_(backend_port), hold_(hold) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listen_fd_, 16), 0);
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~SlowProxy() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    accept_thread_.join();
    close(listen_fd_);
    absl::MutexLock lock(&mu_);
    for (std::thread& t : pumps_) t.join();
  }

  int port() const { return port_; }
  int connections() const { return connections_.load(); }

 private:
  void AcceptLoop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      ++connections_;
      absl::MutexLock lock(&mu_);
      pumps_.emplace_back([this, client] { Pump(client); });
    }
  }

  void Pump(int client) {
    std::this_thread::sleep_for(hold_);
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(backend_port_));
    if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      char buf[1 << 14];
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      bool open = true;
      while (open && !stop_) {
        if (poll(fds, 2, 50) <= 0) continue;
        for (int i = 0; i < 2 && open; ++i) {
          if (fds[i].revents == 0) continue;
          const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
          if (n <= 0) {
            open = false;
            break;
          }
          const int to = fds[1 - i].fd;
          for (ssize_t off = 0; off < n;) {
            const ssize_t w = write(to, buf + off, static_cast<size_t>(n - off));
            if (w <= 0) {
              open = false;
              break;
            }
            off += w;
          }
        }
      }
    }
    close(server);
    close(client);
  }

  const int backend_port_;
  const std::chrono::milliseconds hold_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread accept_thread_;
  absl::Mutex mu_;
  std::vector<std::thread> pumps_;  // guarded by mu_
};

grpc::Status CallUnknownMethod(const std::string& target,
                               std::chrono::milliseconds deadline) {
  auto channel = MakeChannel(target, /*own_connection=*/true);
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  grpc::Status status;
  absl::Mutex mu;
  bool done = false;
  stub.UnaryCall(&ctx, "/gradsync.test.Nothing/Here", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status s) {
                   absl::MutexLock lock(&mu);
                   status = std::move(s);
                   done = true;
                 });
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(&done));
  return status;
}

TEST(GrpcConnect, AHandshakeSlowerThanTheReconnectBackoffStillConnects) {
  // A generic callback service answers every method UNIMPLEMENTED.
  grpc::CallbackGenericService service;
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", ServerCredentialsFor(GetClusterSecurity()),
                           &port);
  builder.RegisterCallbackGenericService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_TRUE(server != nullptr && port > 0);
  // Longer than the 200 ms reconnect backoff, well inside the connect timeout.
  ASSERT_GT(kMinConnectTimeoutMs, 1500);
  SlowProxy proxy(port, std::chrono::milliseconds(700));
  const grpc::Status s = CallUnknownMethod(absl::StrCat("127.0.0.1:", proxy.port()),
                                           std::chrono::seconds(10));
  // UNIMPLEMENTED comes from the server: the call got through the handshake.
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED)
      << s.error_code() << ": " << s.error_message();
  EXPECT_EQ(proxy.connections(), 1) << "the first attempt was abandoned";
  server->Shutdown(std::chrono::system_clock::now());
}

// Servers do not share a port (no SO_REUSEPORT): a second server on a port
// that a running one holds fails to start with an error naming the address.
TEST(GrpcConnect, ASecondServerOnAPortInUseFailsToStart) {
  // Any service (a server needs one); every method answers UNIMPLEMENTED.
  v1::Coordinator::Service a, b, c;
  absl::StatusOr<StartedServer> first = StartServer("127.0.0.1:0", {&a});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string taken = absl::StrCat("127.0.0.1:", first->port);
  absl::StatusOr<StartedServer> second = StartServer(taken, {&b});
  EXPECT_FALSE(second.ok()) << "a second server listens on " << taken;
  if (!second.ok()) {
    EXPECT_NE(second.status().message().find(taken), std::string::npos)
        << second.status();
  }
  absl::StatusOr<StartedServer> peer = StartPeerServer(taken, {&c}, true);
  EXPECT_FALSE(peer.ok()) << "a bulk Peer server listens on " << taken;
  first->server->Shutdown(std::chrono::system_clock::now());
}

TEST(GrpcConnect, ARefusedConnectionStillFailsFast) {
  // A port nobody listens on: refused at once, not held for the connect
  // timeout (a dead daemon is reported promptly).
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  close(fd);  // bound, never listened: the port is free and refuses
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status s =
      CallUnknownMethod(absl::StrCat("127.0.0.1:", port), std::chrono::seconds(10));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_LT(took, std::chrono::milliseconds(kMinConnectTimeoutMs));
}

// The "HOST:port" helpers: the host is what precedes the last ':'.
TEST(GrpcAddresses, HostBulkAndLocalAddresses) {
  EXPECT_EQ(AddressHost("10.0.0.1:5000"), "10.0.0.1");
  EXPECT_EQ(AddressHost("[::1]:7000"), "[::1]");
  EXPECT_EQ(AddressHost("worker-3"), "worker-3");
  EXPECT_EQ(AddressHost("[::1]"), "[::1]");  // bracketed, no port
  EXPECT_EQ(AddressHost("[fd00::3]:7001"), "[fd00::3]");
  EXPECT_EQ(AddressHost("::1"), "::1");  // bare IPv6: all host
  EXPECT_NE(AddressHost("fd00::3"), AddressHost("fd00::4"));
  EXPECT_EQ(AddressHost("[fd00::3"), "[fd00::3");  // unclosed: all host
  EXPECT_TRUE(OnOneHost({}));
  EXPECT_TRUE(OnOneHost({"127.0.0.1:7000", "127.0.0.1:7002"}));
  EXPECT_FALSE(OnOneHost({"127.0.0.1:7000", "10.0.0.2:7000"}));
  EXPECT_FALSE(OnOneHost({"[::1]:7000", "[::2]:7000"}));
  EXPECT_EQ(BulkAddress("worker-3:5000", 6001), "worker-3:6001");
  EXPECT_EQ(BulkAddress("[::1]:5000", 6001), "[::1]:6001");
  EXPECT_EQ(BulkAddress("worker-3", 6001), "");    // no port: not an address
  EXPECT_EQ(BulkAddress("worker-3:5000", 0), "");  // no bulk server
  EXPECT_EQ(BulkAddress("worker-3:5000", -1), "");
  EXPECT_EQ(LocalAddress("0.0.0.0:0", 5000), "127.0.0.1:5000");
  EXPECT_EQ(LocalAddress("[::]:0", 5000), "127.0.0.1:5000");
  EXPECT_EQ(LocalAddress(":0", 5000), "127.0.0.1:5000");
  EXPECT_EQ(LocalAddress("10.0.0.2:0", 5000), "10.0.0.2:5000");
}

}  // namespace
}  // namespace gradsync
