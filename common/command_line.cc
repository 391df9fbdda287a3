#include "common/command_line.h"

#include <algorithm>
#include <utility>

namespace gradsync {

std::string CanonicalFlagSpelling(std::string arg) {
  if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) return arg;
  const size_t end = std::min(arg.find('='), arg.size());
  std::replace(arg.begin() + 2, arg.begin() + static_cast<std::ptrdiff_t>(end), '-', '_');
  return arg;
}

CommandLine::CommandLine(int argc, char** argv) {
  bool flags_ended = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") flags_ended = true;
    args_.push_back(flags_ended || i == 0 ? std::move(arg)
                                          : CanonicalFlagSpelling(std::move(arg)));
  }
  for (std::string& a : args_) pointers_.push_back(a.data());
  pointers_.push_back(nullptr);
}

}  // namespace gradsync
