#include "common/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

constexpr char kMagic[8] = {'G', 'S', 'Y', 'N', 'C', 'K', 'P', 'T'};
constexpr char kSuffix[] = ".ckpt";

// The fixed part after the magic: version, key length, then (after the key)
// step, optimizer steps and the three float counts.
struct Fixed {
  int64_t step, optimizer_steps;
  uint64_t params, first, second;
};

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat("checkpoint ", path, ": ", what, ": ", std::strerror(errno)));
}

// Writes all of `bytes` to fd, folding them into *crc.
bool WriteAll(int fd, const void* bytes, size_t n, uLong* crc) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  if (crc != nullptr) {
    for (size_t done = 0; done < n;) {  // zlib takes 32-bit lengths
      const uInt len = static_cast<uInt>(std::min<size_t>(n - done, 1u << 30));
      *crc = crc32(*crc, p + done, len);
      done += len;
    }
  }
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool WriteBody(int fd, const CheckpointView& c) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const uint32_t version = kCheckpointVersion;
  const uint32_t key_len = static_cast<uint32_t>(c.key.size());
  const Fixed f{c.step, c.optimizer_steps, c.params.size(), c.first_moment.size(),
                c.second_moment.size()};
  bool ok = WriteAll(fd, kMagic, sizeof(kMagic), &crc) &&
            WriteAll(fd, &version, 4, &crc) && WriteAll(fd, &key_len, 4, &crc) &&
            WriteAll(fd, c.key.data(), c.key.size(), &crc) &&
            WriteAll(fd, &f, sizeof(f), &crc) &&
            WriteAll(fd, c.params.data(), c.params.size() * 4, &crc) &&
            WriteAll(fd, c.first_moment.data(), c.first_moment.size() * 4, &crc) &&
            WriteAll(fd, c.second_moment.data(), c.second_moment.size() * 4, &crc);
  const uint32_t sum = static_cast<uint32_t>(crc);
  return ok && WriteAll(fd, &sum, 4, nullptr);
}

absl::Status SyncDirectory(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return IoError("open directory", path);
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok ? absl::OkStatus() : IoError("fsync directory", path);
}

absl::Status Corrupt(const std::string& path, const std::string& why) {
  return absl::DataLossError(
      absl::StrCat("checkpoint ", path, " is corrupt (", why, "); refusing to use it"));
}

// Reads n floats at *at of `bytes` into out.
void TakeFloats(const std::string& bytes, size_t* at, uint64_t n,
                std::vector<float>* out) {
  out->resize(n);
  std::memcpy(out->data(), bytes.data() + *at, n * 4);
  *at += n * 4;
}

}  // namespace

absl::Status WriteCheckpoint(const std::string& path, const CheckpointView& c) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("checkpoint ", path, ": create directory: ", ec.message()));
  }
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return IoError("create", tmp);
  absl::Status st;
  if (!WriteBody(fd, c)) st = IoError("write", tmp);
  if (st.ok() && ::fsync(fd) != 0) st = IoError("fsync", tmp);
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = IoError("rename to its final name", tmp);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return SyncDirectory(path);
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", path, " not found"));
  }
  std::string bytes(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": read failed"));
  }
  const size_t head = sizeof(kMagic) + 8;
  if (bytes.size() < head + sizeof(Fixed) + 4) return Corrupt(path, "truncated");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return Corrupt(path, "not a gradsync checkpoint: bad magic");
  }
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 4, 4);
  const uint32_t actual = static_cast<uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()),
            static_cast<uInt>(bytes.size() - 4)));
  if (stored != actual) {
    return Corrupt(path, absl::StrCat("CRC-32 ", actual, " != stored ", stored));
  }
  uint32_t version, key_len;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&key_len, bytes.data() + 12, 4);
  if (version != kCheckpointVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", path, " has format version ", version,
                     "; this build reads version ", kCheckpointVersion));
  }
  Fixed f;
  if (bytes.size() < head + key_len + sizeof(f) + 4) return Corrupt(path, "truncated");
  std::memcpy(&f, bytes.data() + head + key_len, sizeof(f));
  const uint64_t floats = f.params + f.first + f.second;
  if (floats > bytes.size() ||
      head + key_len + sizeof(f) + floats * 4 + 4 != bytes.size()) {
    return Corrupt(path, "sizes do not match the file's length");
  }
  Checkpoint c;
  c.key = bytes.substr(head, key_len);
  c.step = f.step;
  c.optimizer_steps = f.optimizer_steps;
  size_t at = head + key_len + sizeof(f);
  TakeFloats(bytes, &at, f.params, &c.params);
  TakeFloats(bytes, &at, f.first, &c.first_moment);
  TakeFloats(bytes, &at, f.second, &c.second_moment);
  return c;
}

std::string CheckpointFile(const std::string& dir, const std::string& piece,
                           int64_t step) {
  return absl::StrCat(dir, "/", piece, "-", step, kSuffix);
}

std::map<std::string, std::set<int64_t>> ListCheckpoints(const std::string& dir) {
  std::map<std::string, std::set<int64_t>> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t dash = name.rfind('-');
    const size_t suffix = name.size() - (sizeof(kSuffix) - 1);
    if (name.size() <= sizeof(kSuffix) || dash == std::string::npos ||
        name.compare(suffix, std::string::npos, kSuffix) != 0) {
      continue;
    }
    int64_t step;
    if (absl::SimpleAtoi(name.substr(dash + 1, suffix - dash - 1), &step)) {
      out[name.substr(0, dash)].insert(step);
    }
  }
  return out;
}

void PruneCheckpoints(const std::string& dir, const std::string& piece, int keep) {
  const auto listing = ListCheckpoints(dir);
  const auto it = listing.find(piece);
  if (it == listing.end()) return;
  int kept = 0;
  for (auto s = it->second.rbegin(); s != it->second.rend(); ++s) {
    if (kept++ < keep) continue;
    std::error_code ec;
    std::filesystem::remove(CheckpointFile(dir, piece, *s), ec);
  }
}

bool IsCheckpointJobId(const std::string& job_id) {
  return !job_id.empty() && job_id[0] != '.' &&
         job_id.find_first_of("/\\") == std::string::npos;
}

std::set<int64_t> CommonSteps(const std::map<std::string, std::set<int64_t>>& listing) {
  if (listing.empty()) return {};
  std::set<int64_t> common = listing.begin()->second;
  for (const auto& [piece, steps] : listing) {
    std::set<int64_t> keep;
    for (int64_t s : common) {
      if (steps.count(s)) keep.insert(s);
    }
    common = std::move(keep);
  }
  return common;
}

}  // namespace gradsync
