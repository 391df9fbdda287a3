#include "common/grpc/refusal_log.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

// A field of a line as the caller sent it (a job id, a path) may be long or
// hold a newline that would forge a line of its own: cut, and every byte
// outside printable ASCII (and the backslash) written as \xHH.
std::string Printable(absl::string_view field) {
  constexpr size_t kMaxChars = 200;
  std::string out;
  for (char c : field.substr(0, kMaxChars)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e || c == '\\') {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  if (field.size() > kMaxChars) out += "...";
  return out;
}

}  // namespace

void RefusalLog::Refused(absl::string_view what, absl::string_view peer,
                         absl::string_view why) {
  if (std::optional<std::string> line = Line(what, peer, why, env_->Now())) {
    spdlog::warn("{}", *line);
  }
}

std::optional<std::string> RefusalLog::Line(absl::string_view what,
                                            absl::string_view peer, absl::string_view why,
                                            absl::Time now) {
  int64_t suppressed = 0;
  {
    absl::MutexLock lock(&mu_);
    if (now - window_start_ >= kWindow) {
      suppressed = suppressed_;
      suppressed_ = 0;
      lines_ = 0;
      window_start_ = now;
    }
    if (lines_ >= kLines) {
      ++suppressed_;
      return std::nullopt;
    }
    ++lines_;
  }
  std::string line = absl::StrCat("refused ", Printable(what), " from ", Printable(peer),
                                  ": ", Printable(why));
  if (suppressed > 0) {
    absl::StrAppend(&line, " (", suppressed, " earlier refusals not logged)");
  }
  return line;
}

}  // namespace gradsync
