#include "common/metrics/http_listener.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/metrics_server.h"

namespace gradsync {
namespace {

// Milliseconds from now to `deadline` for poll(2), at least 0.
int MillisUntil(const Env* env, absl::Time deadline) {
  const int64_t ms = absl::ToInt64Milliseconds(deadline - env->NowMonotonic());
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

// Waits until `fd` has `events` (or an error or hang-up) or `deadline`.
bool PollUntil(const Env* env, int fd, int16_t events, absl::Time deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, MillisUntil(env, deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

std::string AddressText(const sockaddr_storage& a, int* port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    *port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    *port = ntohs(v6->sin6_port);
  }
  return text;
}

// One connection's bytes for httplib, within the front's limits (see the
// header): a budget of bytes and a deadline per request, a write timeout.
class BoundedStream : public httplib::Stream {
 public:
  BoundedStream(int fd, const Env* env, absl::Duration write_timeout)
      : fd_(fd), env_(env), write_timeout_(write_timeout) {}

  // The next request may read `head_bytes` until the blank line that ends
  // its head, then `body_bytes`, all until `deadline`.
  void BeginRequest(size_t head_bytes, size_t body_bytes, absl::Time deadline) {
    budget_ = head_bytes;
    body_bytes_ = body_bytes;
    in_head_ = true;
    line_empty_ = false;
    deadline_ = deadline;
    too_large_ = timed_out_ = wrote_ = false;
  }
  // Waits for a request's first byte until `deadline`.
  bool AwaitRequest(absl::Time deadline) {
    return begin_ < end_ || (PollUntil(env_, fd_, POLLIN, deadline) && Fill() > 0);
  }
  bool too_large() const { return too_large_; }
  bool timed_out() const { return timed_out_; }
  bool wrote() const { return wrote_; }

  bool is_readable() const override { return begin_ < end_; }
  bool is_writable() const override {
    return PollUntil(env_, fd_, POLLOUT, env_->NowMonotonic() + write_timeout_);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (budget_ == 0) {
      too_large_ = true;
      return -1;
    }
    if (begin_ == end_) {
      if (!PollUntil(env_, fd_, POLLIN, deadline_)) {
        timed_out_ = true;
        return -1;
      }
      const ssize_t n = Fill();
      if (n <= 0) return n;
    }
    size_t k = std::min({size, budget_, end_ - begin_});
    if (in_head_) {
      // Up to the head's last byte only, so the body gets its own budget.
      for (size_t i = 0; i < k; ++i) {
        const char c = buffer_[begin_ + i];
        if (c == '\n') {
          if (line_empty_) {
            k = i + 1;
            in_head_ = false;
            break;
          }
          line_empty_ = true;
        } else if (c != '\r') {
          line_empty_ = false;
        }
      }
    }
    std::memcpy(ptr, buffer_ + begin_, k);
    begin_ += k;
    budget_ -= k;
    if (!in_head_ && body_bytes_ != kHeadDone) {
      budget_ = body_bytes_;
      body_bytes_ = kHeadDone;
    }
    return static_cast<ssize_t>(k);
  }

  ssize_t write(const char* ptr, size_t size) override {
    wrote_ = true;
    const absl::Time deadline = env_->NowMonotonic() + write_timeout_;
    size_t done = 0;
    while (done < size) {
      if (!PollUntil(env_, fd_, POLLOUT, deadline)) return -1;
      const ssize_t n = ::send(fd_, ptr + done, size - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return -1;
      done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    port = 0;
    ip = ::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0
             ? AddressText(a, &port)
             : "";
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    port = 0;
    ip = ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0
             ? AddressText(a, &port)
             : "";
  }
  socket_t socket() const override { return fd_; }

 private:
  // Reads what the socket has into the (empty) buffer.
  ssize_t Fill() {
    begin_ = end_ = 0;
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer_, sizeof(buffer_), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) end_ = static_cast<size_t>(n);
      return n;
    }
  }

  const int fd_;
  const Env* const env_;
  const absl::Duration write_timeout_;
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
  static constexpr size_t kHeadDone = ~size_t{0};
  size_t budget_ = 0;
  size_t body_bytes_ = kHeadDone;  // the body's budget, until the head ends
  bool in_head_ = false;
  bool line_empty_ = false;  // the head's current line has no byte yet
  absl::Time deadline_;
  bool too_large_ = false, timed_out_ = false, wrote_ = false;
};

// httplib's thread pool, plus: when a connection arrives and every thread is
// taken, and again each time a thread takes a connection while others still
// wait for one, `on_full` is called (the server closes its longest-waiting
// connection, so that a thread frees within milliseconds).
class EvictingPool : public httplib::TaskQueue {
 public:
  EvictingPool(int threads, std::function<void()> on_full)
      : on_full_(std::move(on_full)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
    ticker_ = std::thread([this] { Tick(); });
  }
  ~EvictingPool() override = default;

  void enqueue(std::function<void()> fn) override {
    bool full;
    {
      std::lock_guard<std::mutex> l(mu_);
      jobs_.push_back(std::move(fn));
      full = busy_ + jobs_.size() > threads_.size();
    }
    cv_.notify_one();
    if (full) on_full_();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    tick_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    ticker_.join();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> fn;
      bool backlog;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, nothing left
        fn = std::move(jobs_.front());
        jobs_.pop_front();
        ++busy_;
        backlog = !jobs_.empty();
      }
      // Connections still wait for a thread: make room for the next one.
      if (backlog) on_full_();
      fn();
      std::lock_guard<std::mutex> l(mu_);
      --busy_;
    }
  }

  // While connections wait and every thread is taken, asks again every
  // kRetry: an eviction can find nothing to close (every served connection
  // already on its way out but not yet closed, on a loaded machine), and
  // without a later ask the threads could all end up held by slow clients
  // for their whole read timeout while a real request waits.
  void Tick() {
    constexpr auto kRetry = std::chrono::milliseconds(100);
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      tick_cv_.wait_for(l, kRetry, [this] { return stop_; });
      if (stop_ || jobs_.empty() || busy_ < threads_.size()) continue;
      l.unlock();
      on_full_();
      l.lock();
    }
  }

  const std::function<void()> on_full_;
  std::mutex mu_;
  std::condition_variable tick_cv_;  // wakes Tick at shutdown
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  size_t busy_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
  std::thread ticker_;  // Tick
};

}  // namespace

// httplib's Server with the bounded front of the header: it serves each
// connection itself (process_and_close_socket) and keeps the open ones in a
// table, so that it can close the longest-waiting one, or all at Stop.
class BoundedHttpServer : public httplib::Server {
 public:
  BoundedHttpServer(int threads, const Env* env) : env_(env) {
    new_task_queue = [this, threads] {
      return new EvictingPool(threads, [this] { EvictLongestWaiting(); });
    };
    set_payload_max_length(kHttpDefaultMaxBodyBytes);
    set_read_timeout(kHttpDefaultRequestTimeoutSeconds, 0);
  }

  // After stop(): wakes every open connection, and closes at once those that
  // still wait for a thread (httplib serves its queue before it returns).
  void CloseAll() {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    for (const auto& [fd, since] : waiting_since_) ::shutdown(fd, SHUT_RDWR);
  }

  // httplib listens with a backlog of 5: a burst of connections (a page's
  // assets, or clients the front is about to close) then waits out TCP's
  // 1 s SYN retry. Linux takes a second listen() as a new backlog.
  void WidenBacklog() { ::listen(svr_sock_, SOMAXCONN); }

  HttpListener::Stats stats() const {
    absl::MutexLock l(&mu_);
    return stats_;
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    bool stopping;
    {
      absl::MutexLock l(&mu_);
      stopping = stopping_;
      waiting_since_[sock] = env_->NowMonotonic();
    }
    const bool ok = !stopping && Serve(sock);
    {
      absl::MutexLock l(&mu_);
      waiting_since_.erase(sock);
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
  }

  // Requests on one connection, keep-alive, until one fails, the client
  // closes, the count is reached or the server stops.
  bool Serve(int fd) {
    const absl::Duration request_timeout =
        absl::Seconds(read_timeout_sec_) + absl::Microseconds(read_timeout_usec_);
    BoundedStream strm(
        fd, env_,
        absl::Seconds(write_timeout_sec_) + absl::Microseconds(write_timeout_usec_));
    bool ok = false;
    for (size_t served = 0; served < keep_alive_max_count_; ++served) {
      const absl::Duration wait =
          served == 0 ? request_timeout : absl::Seconds(keep_alive_timeout_sec_);
      if (!strm.AwaitRequest(env_->NowMonotonic() + wait)) break;
      strm.BeginRequest(kHttpMaxHeadBytes, payload_max_length_,
                        env_->NowMonotonic() + request_timeout);
      bool closed = false;
      ok = process_request(strm, served + 1 == keep_alive_max_count_, closed, nullptr);
      absl::MutexLock l(&mu_);
      if (strm.too_large()) ++stats_.too_large;
      if (strm.timed_out()) ++stats_.timed_out;
      // A request cut off is the connection's last (httplib may have
      // answered it 400 itself and carried on).
      if (!ok || strm.too_large() || strm.timed_out()) {
        // httplib gave up reading: say why, if nothing was answered yet.
        if (!strm.wrote() && (strm.too_large() || strm.timed_out())) {
          static constexpr char k431[] =
              "HTTP/1.1 431 Request Header Fields Too Large\r\n"
              "Connection: close\r\nContent-Length: 0\r\n\r\n";
          static constexpr char k408[] =
              "HTTP/1.1 408 Request Timeout\r\n"
              "Connection: close\r\nContent-Length: 0\r\n\r\n";
          const char* reply = strm.too_large() ? k431 : k408;
          ::send(fd, reply, std::strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        break;
      }
      ++stats_.served;
      if (closed) break;
      waiting_since_[fd] = env_->NowMonotonic();
    }
    return ok;
  }

  // A connection waits for a thread: close the connection that has waited
  // longest for its current request (a slow or idle client; a real request
  // is answered in milliseconds and starts its wait afresh).
  void EvictLongestWaiting() {
    absl::MutexLock l(&mu_);
    auto oldest = std::min_element(
        waiting_since_.begin(), waiting_since_.end(),
        [](const auto& a, const auto& b) { return a.second < b.second; });
    if (oldest == waiting_since_.end() || oldest->second == absl::InfiniteFuture()) {
      return;  // every open one is already on its way out
    }
    ::shutdown(oldest->first, SHUT_RDWR);
    oldest->second = absl::InfiniteFuture();  // not again
    ++stats_.evicted;
  }

  const Env* const env_;
  mutable absl::Mutex mu_;
  // Open connections (fd until closed) and when each began waiting for its
  // current request.
  std::map<int, absl::Time> waiting_since_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  HttpListener::Stats stats_ ABSL_GUARDED_BY(mu_);
};

HttpListener::HttpListener(int threads, std::string what, const Env* env)
    : what_(std::move(what)),
      env_(env),
      server_(std::make_unique<BoundedHttpServer>(threads, env)) {
  // httplib's default sets SO_REUSEPORT, with which a second daemon could
  // bind the same port and take half the requests: only SO_REUSEADDR here
  // (a restart may bind at once; a port in use is an error).
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

HttpListener::~HttpListener() { Stop(); }

httplib::Server* HttpListener::server() { return server_.get(); }

HttpListener::Stats HttpListener::stats() const {
  return server_ == nullptr ? stopped_stats_ : server_->stats();
}

// 1. parse and bind (failures are reported, nothing is left running);
// 2. serve on a thread of our own;
// 3. wait until httplib says it is serving (see Stop).
absl::StatusOr<std::string> HttpListener::Start(const std::string& listen,
                                                absl::Time deadline) {
  absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(listen);
  if (!hp.ok()) return hp.status();
  auto [host, port] = *hp;
  const bool bound = port == 0 ? (port = server_->bind_to_any_port(host)) > 0
                               : server_->bind_to_port(host, port);
  if (!bound) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat(what_, ": cannot listen on ", listen,
                                               " (address in use or not local?)"));
  }
  server_->WidenBacklog();
  httplib::Server* s = server_.get();
  thread_ = std::thread([this, s] {
    s->listen_after_bind();
    finished_ = true;
  });
  while (!server_->is_running() && !finished_) {
    if (env_->Now() > deadline) {
      return absl::UnavailableError(
          absl::StrCat(what_, ": server on ", listen, " did not start in time"));
    }
    env_->SleepFor(absl::Milliseconds(1));
  }
  if (finished_) {
    return absl::UnavailableError(
        absl::StrCat(what_, ": server on ", listen, " stopped at start"));
  }
  const std::string shown =
      host.find(':') == std::string::npos ? host : absl::StrCat("[", host, "]");
  return absl::StrCat(shown, ":", port);
}

// httplib's stop() does nothing before listen_after_bind has begun serving
// (Start waits for that, unless it gave up at its deadline), and must be
// called once only: wait until it serves or has ended, then stop it once.
void HttpListener::Stop() {
  if (server_ == nullptr) return;
  if (thread_.joinable()) {
    while (!server_->is_running() && !finished_) {
      env_->SleepFor(absl::Milliseconds(1));
    }
    if (!finished_) {
      server_->stop();
      server_->CloseAll();
    }
    thread_.join();
  }
  stopped_stats_ = server_->stats();
  server_.reset();
}

}  // namespace gradsync
