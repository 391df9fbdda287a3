// The bounded front of HttpListener (http_listener.h) against raw sockets on
// loopback: what a hostile client sends is cut off at the limits, slow
// clients time out or make room, and real requests still get answered.
#include "common/metrics/http_listener.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/metrics/metrics_server.h"

namespace gradsync {
namespace {

absl::Time Soon() { return absl::Now() + absl::Seconds(5); }

// A listener with GET /hello (and nothing else) on a free loopback port.
struct Hello {
  explicit Hello(int threads) : listener(threads, "test") {
    listener.server()->Get("/hello", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("hi", "text/plain");
    });
  }
  std::string Start() {
    absl::StatusOr<std::string> at = listener.Start("127.0.0.1:0", Soon());
    EXPECT_TRUE(at.ok()) << at.status();
    return at.ok() ? *at : "";
  }
  HttpListener listener;
};

int Connect(const std::string& address) {
  absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address);
  EXPECT_TRUE(hp.ok());
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(hp->second));
  inet_pton(AF_INET, hp->first.c_str(), &a.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

bool SendAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// What the server sends until it closes, or until `seconds` pass.
std::string ReadUntilClosed(int fd, int seconds) {
  std::string got;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, seconds * 1000) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// The hostile request of the probe: "GET /" and then junk with no end. The
// server must stop taking it after the head limit (16 KiB), long before the
// 64 MiB this client would send (the kernel's socket buffers on both sides
// absorb a few MiB, hence the margin).
TEST(HttpListener, EndlessRequestLineIsCutOffAtTheLimit) {
  Hello h(2);
  const std::string at = h.Start();
  const int fd = Connect(at);
  ASSERT_TRUE(SendAll(fd, "GET /"));
  const std::string junk(1 << 20, 'a');
  size_t sent = 0;
  while (sent < (64u << 20) && SendAll(fd, junk)) sent += junk.size();
  EXPECT_LT(sent, 32u << 20) << "the server kept reading an endless request line";
  ::close(fd);
  // And it still answers.
  const int ok = Connect(at);
  ASSERT_TRUE(SendAll(ok, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(absl::StartsWith(ReadUntilClosed(ok, 10), "HTTP/1.1 200")) << "no answer";
  ::close(ok);
  h.listener.Stop();
  EXPECT_EQ(h.listener.stats().too_large, 1u);
}

// Too many headers: refused with a 4xx (httplib's own 400 when it notices
// first, else 431), and the connection closed.
TEST(HttpListener, OversizedHeadIsRefusedAndClosed) {
  Hello h(2);
  const std::string at = h.Start();
  const int fd = Connect(at);
  std::string head = "GET /hello HTTP/1.1\r\n";
  while (head.size() < kHttpMaxHeadBytes + 100) head += "X-Pad: 0123456789abcdef\r\n";
  ASSERT_TRUE(SendAll(fd, head));  // no blank line: the head never ends
  const absl::Time t0 = absl::Now();
  const std::string reply = ReadUntilClosed(fd, 30);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(30)) << "the connection stayed open";
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 4")) << reply;
  ::close(fd);
  h.listener.Stop();
  EXPECT_EQ(h.listener.stats().too_large, 1u);
  EXPECT_EQ(h.listener.stats().timed_out, 0u);
}

// A body larger than the payload limit is refused by its Content-Length,
// and the connection does not stay to swallow it.
TEST(HttpListener, LargeBodyIsRefusedNotRead) {
  Hello h(2);
  const std::string at = h.Start();
  const int fd = Connect(at);
  ASSERT_TRUE(SendAll(fd,
                      "POST /hello HTTP/1.1\r\nHost: x\r\n"
                      "Content-Length: 1073741824\r\n\r\n"));
  const std::string junk(1 << 20, 'b');
  size_t sent = 0;
  while (sent < (64u << 20) && SendAll(fd, junk)) sent += junk.size();
  EXPECT_LT(sent, 32u << 20) << "the server kept reading a 1 GiB body";
  ::close(fd);
  h.listener.Stop();
  EXPECT_GE(h.listener.stats().too_large, 1u);
}

// One byte now and then does not keep a request open past the read timeout
// (from its first byte to its last), whatever the per-recv gaps: refused
// (408, or httplib's 400 when it is reading headers) and closed.
TEST(HttpListener, TricklingRequestTimesOut) {
  Hello h(2);
  h.listener.server()->set_read_timeout(1, 0);
  const std::string at = h.Start();
  const int fd = Connect(at);
  ASSERT_TRUE(SendAll(fd, "GET /hello HTTP/1.1\r\n"));
  std::string reply;
  for (int i = 0; i < 40; ++i) {  // 40 × 0.25 s: 10 s of trickling at most
    if (!SendAll(fd, "X")) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 250) > 0) {
      reply = ReadUntilClosed(fd, 30);
      break;
    }
  }
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 4")) << "got: " << reply;
  ::close(fd);
  h.listener.Stop();
  EXPECT_EQ(h.listener.stats().timed_out, 1u);
}

// Many clients that open a connection and send half a request hold no
// thread against a real one: with 4 threads, a read timeout of a minute and
// 40 such clients, a complete request is still answered (it could not be,
// within its 20 s, if the slow ones kept their threads), and the slow ones
// were closed to make room.
TEST(HttpListener, SlowClientsMakeRoomForARealRequest) {
  Hello h(4);
  h.listener.server()->set_read_timeout(60, 0);
  const std::string at = h.Start();
  std::vector<int> slow;
  for (int i = 0; i < 40; ++i) {
    slow.push_back(Connect(at));
    ASSERT_TRUE(SendAll(slow.back(), "GET /hello HTTP/1.1\r\n"));
  }
  absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(at);
  ASSERT_TRUE(hp.ok());
  httplib::Client client(hp->first, hp->second);
  client.set_read_timeout(20);
  httplib::Result res = client.Get("/hello");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "hi");
  for (int fd : slow) ::close(fd);
  h.listener.Stop();
  EXPECT_GE(h.listener.stats().evicted, 36u);
}

// Two requests in one write on a keep-alive connection: both answered, in
// order (the stream's read-ahead carries over to the next request).
TEST(HttpListener, PipelinedKeepAliveRequestsAreBothAnswered) {
  Hello h(2);
  const std::string at = h.Start();
  const int fd = Connect(at);
  ASSERT_TRUE(SendAll(fd,
                      "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
                      "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string reply = ReadUntilClosed(fd, 10);
  const size_t second = reply.find("HTTP/1.1 404");
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200")) << reply;
  EXPECT_NE(second, std::string::npos) << reply;
  ::close(fd);
  h.listener.Stop();
  EXPECT_EQ(h.listener.stats().served, 2u);
}

}  // namespace
}  // namespace gradsync
