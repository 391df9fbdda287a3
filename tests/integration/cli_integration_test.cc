// The gradsync CLI against bad input: it says what is wrong in one line and
// exits before anything starts (no daemon, no job).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/integration/cluster_fixture.h"

namespace gradsync {
namespace {

TEST(Integration, CliPointedAtAClosedPortSaysSoInOneLine) {
  const std::string dir = TempDir();
  const int rc =
      Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync status j-1 --server=127.0.0.1:1 > ",
                         dir, "/out 2> ", dir, "/err"),
            30);
  EXPECT_EQ(rc, 1);
  const std::string err = Slurp(dir + "/err");
  EXPECT_NE(err.find("cannot reach the coordinator at 127.0.0.1:1"), std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(Integration, CliRejectsUnknownCommandAndBadPairs) {
  EXPECT_EQ(Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync frobnicate 2>/dev/null"), 30),
            2);
  EXPECT_EQ(Shell(absl::StrCat(GRADSYNC_BIN_DIR,
                               "/gradsync local --compare --pairs=ps-lazy 2>/dev/null"),
                  30),
            2);
}

// An output file that cannot be written is refused before any daemon starts
// or job runs (issue 51: it failed only after the job had run).
TEST(Integration, CliRefusesAnUnwritableResultsPathBeforeRunning) {
  const std::string dir = TempDir();
  const std::string out = dir + "/out.txt";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"local --steps=5 --results=" + dir + "/missing/r.json", "does not exist"},
      {"local bench --sizes=4K --results=" + dir + "/missing/r.json", "does not exist"},
      {"local --steps=5 --results=" + dir, "is a directory"},
      {"local --steps=5 --trace --trace_file=" + dir + "/no/t.json", "does not exist"},
  };
  for (const auto& [args, says] : cases) {
    EXPECT_EQ(Shell(absl::StrCat(GRADSYNC_BIN_DIR, "/gradsync ", args, " --log_dir=", dir,
                                 "/logs > ", out, " 2>&1"),
                    30),
              2)
        << args << ": " << Slurp(out);
    EXPECT_NE(Slurp(out).find(says), std::string::npos) << args << ": " << Slurp(out);
    EXPECT_EQ(Slurp(out).find("starting"), std::string::npos) << Slurp(out);
  }
}

}  // namespace
}  // namespace gradsync
