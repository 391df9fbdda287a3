#include "common/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

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

// Appends n bytes to *out, folding them into *crc.
void Append(const void* bytes, size_t n, uLong* crc, std::string* out) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t done = 0; done < n;) {  // zlib takes 32-bit lengths
    const uInt len = static_cast<uInt>(std::min<size_t>(n - done, 1u << 30));
    *crc = crc32(*crc, p + done, len);
    done += len;
  }
  out->append(reinterpret_cast<const char*>(p), n);
}

// The file's bytes: magic, version, key, the fixed part, the floats, CRC-32.
std::string Serialize(const CheckpointView& c) {
  std::string out;
  out.reserve(sizeof(kMagic) + 8 + c.key.size() + sizeof(Fixed) +
              4 * (c.params.size() + c.first_moment.size() + c.second_moment.size()) + 4);
  uLong crc = crc32(0L, Z_NULL, 0);
  const uint32_t version = kCheckpointVersion;
  const uint32_t key_len = static_cast<uint32_t>(c.key.size());
  const Fixed f{c.step, c.optimizer_steps, c.params.size(), c.first_moment.size(),
                c.second_moment.size()};
  Append(kMagic, sizeof(kMagic), &crc, &out);
  Append(&version, 4, &crc, &out);
  Append(&key_len, 4, &crc, &out);
  Append(c.key.data(), c.key.size(), &crc, &out);
  Append(&f, sizeof(f), &crc, &out);
  Append(c.params.data(), c.params.size() * 4, &crc, &out);
  Append(c.first_moment.data(), c.first_moment.size() * 4, &crc, &out);
  Append(c.second_moment.data(), c.second_moment.size() * 4, &crc, &out);
  const uint32_t sum = static_cast<uint32_t>(crc);
  out.append(reinterpret_cast<const char*>(&sum), 4);
  return out;
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

absl::Status WriteCheckpoint(const std::string& path, const CheckpointView& c,
                             const Env* env) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  absl::Status st = parent.empty() ? absl::OkStatus() : env->CreateDirectories(parent);
  if (st.ok()) st = env->WriteFileAtomically(path, Serialize(c));
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat("checkpoint ", st.message()));
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path, const Env* env) {
  absl::StatusOr<std::string> read = env->ReadFileToString(path);
  if (absl::IsNotFound(read.status())) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", path, " not found"));
  }
  if (!read.ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": read failed (",
                                            read.status().message(), ")"));
  }
  const std::string& bytes = *read;
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
