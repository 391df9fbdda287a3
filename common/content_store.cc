#include "common/content_store.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/spec/model_spec.h"

namespace gradsync {
namespace {

namespace fs = std::filesystem;

constexpr char kTmpPrefix[] = ".tmp-";

std::string Hex(const unsigned char* d, unsigned n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n);
  for (unsigned i = 0; i < n; ++i) {
    s.push_back(kDigits[d[i] >> 4]);
    s.push_back(kDigits[d[i] & 15]);
  }
  return s;
}

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// ".tmp-<pid>-<n>" of a process that is gone.
bool Orphaned(const std::string& name) {
  if (!absl::StartsWith(name, kTmpPrefix)) return false;
  std::vector<std::string> parts =
      absl::StrSplit(name.substr(sizeof(kTmpPrefix) - 1), '-');
  int pid = 0;
  if (parts.empty() || !absl::SimpleAtoi(parts[0], &pid) || pid <= 0) return true;
  return kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

struct ContentStore::Writer::Hash {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Hash() { EVP_MD_CTX_free(ctx); }
};

std::string Sha256Hex(absl::string_view data) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(data.data(), data.size(), d, &n, EVP_sha256(), nullptr);
  return Hex(d, n);
}

absl::StatusOr<std::string> Sha256OfFile(const std::string& path, const Env* env) {
  absl::StatusOr<std::unique_ptr<SequentialFile>> f = env->NewSequentialFile(path);
  if (!f.ok()) return f.status();
  struct Digest {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~Digest() { EVP_MD_CTX_free(ctx); }
  } hash;
  EVP_DigestInit_ex(hash.ctx, EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  while (true) {
    absl::StatusOr<size_t> n = (*f)->Read(buf.data(), buf.size());
    if (!n.ok()) return absl::DataLossError(n.status().message());
    if (*n == 0) break;
    EVP_DigestUpdate(hash.ctx, buf.data(), *n);
  }
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_DigestFinal_ex(hash.ctx, d, &n);
  return Hex(d, n);
}

absl::StatusOr<std::unique_ptr<ContentStore>> ContentStore::Open(std::string dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (Orphaned(e.path().filename().string())) fs::remove(e.path(), ec);
  }
  return std::unique_ptr<ContentStore>(new ContentStore(std::move(dir)));
}

absl::StatusOr<std::string> ContentStore::Find(const std::string& sha256,
                                               bool verify) const {
  if (!IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", sha256.substr(0, 80), "\" is not a SHA-256 (64 hex digits)"));
  }
  const std::string path = absl::StrCat(dir_, "/", sha256);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat("no blob ", sha256, " in ", dir_));
  }
  if (verify) {
    absl::StatusOr<std::string> got = Sha256OfFile(path);
    if (!got.ok()) return got.status();
    if (*got != sha256) {
      fs::remove(path, ec);
      return absl::DataLossError(
          absl::StrCat(path, " no longer has the content its name says; removed"));
    }
  }
  return path;
}

absl::StatusOr<ContentStore::Usage> ContentStore::Measure() const {
  Usage u;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    std::error_code size_ec;
    if (!e.is_regular_file(size_ec)) continue;
    const uintmax_t n = e.file_size(size_ec);
    if (!size_ec) u.stored += n;
  }
  if (ec)
    return absl::InternalError(absl::StrCat("cannot list ", dir_, ": ", ec.message()));
  const fs::space_info space = fs::space(dir_, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot read the free space of ", dir_, ": ", ec.message()));
  }
  u.available = space.available;
  return u;
}

absl::StatusOr<std::unique_ptr<ContentStore::Writer>> ContentStore::NewWriter(
    uint64_t max_bytes) const {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      absl::StrCat(dir_, "/", kTmpPrefix, getpid(), "-", counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(absl::StrCat("cannot create ", tmp));
  return std::unique_ptr<Writer>(new Writer(this, tmp, fd, max_bytes));
}

ContentStore::Writer::Writer(const ContentStore* store, std::string tmp, int fd,
                             uint64_t max_bytes)
    : store_(store),
      tmp_(std::move(tmp)),
      fd_(fd),
      max_bytes_(max_bytes),
      hash_(std::make_unique<Hash>()) {
  EVP_DigestInit_ex(hash_->ctx, EVP_sha256(), nullptr);
}

ContentStore::Writer::~Writer() {
  if (fd_ >= 0) ::close(fd_);
  if (!done_) ::unlink(tmp_.c_str());
}

absl::Status ContentStore::Writer::Append(absl::string_view data) {
  if (done_) return absl::FailedPreconditionError("writer already committed");
  if (data.size() > max_bytes_ - std::min(size_, max_bytes_)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the file is over the limit of ", max_bytes_, " bytes"));
  }
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd_, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno(absl::StrCat("cannot write ", tmp_));
    off += static_cast<size_t>(n);
  }
  EVP_DigestUpdate(hash_->ctx, data.data(), data.size());
  size_ += data.size();
  return absl::OkStatus();
}

absl::StatusOr<ContentInfo> ContentStore::Writer::Commit(
    const std::string& expected_sha256, std::optional<uint64_t> expected_size) {
  if (done_) return absl::FailedPreconditionError("writer already committed");
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_DigestFinal_ex(hash_->ctx, d, &n);
  ContentInfo info{Hex(d, n), size_};
  if (expected_size.has_value() && *expected_size != size_) {
    return absl::DataLossError(
        absl::StrCat("got ", size_, " bytes of a file of ", *expected_size, " bytes"));
  }
  if (!expected_sha256.empty() && expected_sha256 != info.sha256) {
    return absl::DataLossError(absl::StrCat("content has SHA-256 ", info.sha256,
                                            ", not the expected ", expected_sha256));
  }
  if (::fsync(fd_) != 0) return Errno(absl::StrCat("cannot sync ", tmp_));
  ::close(fd_);
  fd_ = -1;
  const std::string final_path = absl::StrCat(store_->dir(), "/", info.sha256);
  if (::rename(tmp_.c_str(), final_path.c_str()) != 0) {
    return Errno(absl::StrCat("cannot rename ", tmp_, " to ", final_path));
  }
  done_ = true;
  return info;
}

}  // namespace gradsync
