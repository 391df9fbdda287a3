#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace gradsync {

absl::Status InitLogging(const std::string& process, const std::string& level) {
  spdlog::level::level_enum lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_level: unknown level '", level,
                     "' (want trace, debug, info, warn, error or off)"));
  }
  auto logger = spdlog::stderr_color_mt(process);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%L%$ %n] %v");
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
  spdlog::flush_every(std::chrono::seconds(1));
  logger->flush_on(spdlog::level::warn);
  return absl::OkStatus();
}

std::string JobTag(const std::string& job_id, int rank) {
  return absl::StrCat("[job ", job_id, " rank ", rank, "] ");
}

}  // namespace gradsync
