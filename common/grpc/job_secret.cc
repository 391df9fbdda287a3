#include "common/grpc/job_secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace gradsync {

absl::StatusOr<std::string> RandomHex(size_t n) {
  std::string raw(n, '\0');
  std::ifstream in("/dev/urandom", std::ios::binary);
  if (!in.read(raw.data(), static_cast<std::streamsize>(n))) {
    return absl::InternalError("cannot read /dev/urandom");
  }
  return absl::BytesToHexString(raw);
}

bool SecretsEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

std::string MetadataValue(const std::multimap<grpc::string_ref, grpc::string_ref>& md,
                          absl::string_view key) {
  auto it = md.find(grpc::string_ref(key.data(), key.size()));
  if (it == md.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

absl::StatusOr<JobKey> JobKey::Generate() {
  absl::StatusOr<std::string> hex = RandomHex(kJobKeyBytes);
  if (!hex.ok()) return hex.status();
  return JobKey(absl::HexStringToBytes(*hex));
}

absl::StatusOr<JobKey> JobKey::ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string hex;
  for (char c : ss.str()) {
    if (!std::isspace(static_cast<unsigned char>(c))) hex.push_back(c);
  }
  const bool is_hex = std::all_of(hex.begin(), hex.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c));
  });
  if (!is_hex || hex.size() % 2 != 0 || hex.size() < 2 * kJobKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a job key is at least ", 2 * kJobKeyBytes,
        " hex digits (make one with: head -c 32 /dev/urandom | xxd -p -c 64)"));
  }
  return JobKey(absl::HexStringToBytes(hex));
}

absl::Status JobKey::WriteNewFile(const std::string& path) {
  absl::StatusOr<std::string> hex = RandomHex(kJobKeyBytes);
  if (!hex.ok()) return hex.status();
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot create ", path));
  const std::string line = *hex + "\n";
  const bool ok =
      write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

std::string JobKey::SecretOf(absl::string_view job_id, int world) const {
  const std::string msg = absl::StrCat("gradsync-job\n", job_id, "\n", world);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), raw_.data(), static_cast<int>(raw_.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(mac), len));
}

bool JobKey::Verify(absl::string_view job_id, int world, absl::string_view secret) const {
  if (world <= 0 || secret.empty()) return false;
  return SecretsEqual(SecretOf(job_id, world), secret);
}

}  // namespace gradsync
