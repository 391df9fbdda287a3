// One spelling rule for the flags of every gradsync binary (the CLI and both
// daemons): `--batch-size` is `--batch_size`.
#ifndef GRADSYNC_COMMON_COMMAND_LINE_H_
#define GRADSYNC_COMMON_COMMAND_LINE_H_

#include <string>
#include <vector>

namespace gradsync {

// Returns `arg` with every '-' in a long flag's name turned into '_':
// "--token-file=a-b" -> "--token_file=a-b". The value after '=' and anything
// that is not a long flag ("-v", "a-b", the bare "--") are returned unchanged.
std::string CanonicalFlagSpelling(std::string arg);

// argv with CanonicalFlagSpelling applied to every argument before the bare
// "--" that ends the flags (arguments after it are left as given), for
// absl::ParseCommandLine. Owns the strings that argv() points into.
//
// Threading: not thread-safe; build and use in main().
class CommandLine {
 public:
  CommandLine(int argc, char** argv);
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  int argc() const { return static_cast<int>(pointers_.size()) - 1; }
  // Valid while this object lives; argv()[argc()] is nullptr, as in main().
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<char*> pointers_;
};

}  // namespace gradsync

#endif  // GRADSYNC_COMMON_COMMAND_LINE_H_
