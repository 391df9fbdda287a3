#include "common/command_line.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gradsync {
namespace {

TEST(CommandLine, LongFlagNamesTakeUnderscoresAndValuesStayAsGiven) {
  EXPECT_EQ(CanonicalFlagSpelling("--token-file=/a-b/c-d"), "--token_file=/a-b/c-d");
  EXPECT_EQ(CanonicalFlagSpelling("--token_file=x"), "--token_file=x");
  EXPECT_EQ(CanonicalFlagSpelling("--ps-reduce-threads"), "--ps_reduce_threads");
  EXPECT_EQ(CanonicalFlagSpelling("--no-tls"), "--no_tls");
  EXPECT_EQ(CanonicalFlagSpelling("--x=--y-z"), "--x=--y-z");
}

TEST(CommandLine, NonFlagsAreUnchanged) {
  for (const std::string arg : {"-v", "a-b", "--", "-", "", "submit", "-a-b"}) {
    EXPECT_EQ(CanonicalFlagSpelling(arg), arg);
  }
}

TEST(CommandLine, ArgvKeepsProgramNameAndStopsAtTheBareDoubleDash) {
  std::vector<std::string> in = {"./my-prog", "--batch-size=3", "local", "--",
                                 "--not-a-flag"};
  std::vector<char*> argv;
  for (std::string& s : in) argv.push_back(s.data());
  CommandLine line(static_cast<int>(argv.size()), argv.data());
  ASSERT_EQ(line.argc(), 5);
  EXPECT_STREQ(line.argv()[0], "./my-prog");
  EXPECT_STREQ(line.argv()[1], "--batch_size=3");
  EXPECT_STREQ(line.argv()[2], "local");
  EXPECT_STREQ(line.argv()[3], "--");
  EXPECT_STREQ(line.argv()[4], "--not-a-flag");
  EXPECT_EQ(line.argv()[5], nullptr);
}

}  // namespace
}  // namespace gradsync
