// The memory a process may use (common/memory.h): the smaller of its
// cgroup's limit and the machine's, with the spellings cgroup v1 and v2
// use for "no limit".
#include "common/memory.h"

#include <gtest/gtest.h>

namespace gradsync {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(MemoryLimit, TheSmallerOfTheCgroupsAndTheMachines) {
  EXPECT_EQ(ParseMemoryLimit("", "", 8 * kGiB), 8 * kGiB);              // no cgroup files
  EXPECT_EQ(ParseMemoryLimit("3221225472\n", "", 8 * kGiB), 3 * kGiB);  // v2
  EXPECT_EQ(ParseMemoryLimit("", "3221225472\n", 8 * kGiB), 3 * kGiB);  // v1
  EXPECT_EQ(ParseMemoryLimit("", "", 0), 0);                            // nothing known
  EXPECT_EQ(ParseMemoryLimit("1073741824", "", 0), kGiB);
  // A cgroup larger than the machine: the machine's.
  EXPECT_EQ(ParseMemoryLimit("17179869184", "", 8 * kGiB), 8 * kGiB);
}

TEST(MemoryLimit, NoLimitSpellingsAndJunkAreNoLimit) {
  EXPECT_EQ(ParseMemoryLimit("max\n", "", 8 * kGiB), 8 * kGiB);
  EXPECT_EQ(ParseMemoryLimit("", "9223372036854771712\n", 8 * kGiB), 8 * kGiB);
  EXPECT_EQ(ParseMemoryLimit("junk", "-5", 8 * kGiB), 8 * kGiB);
  EXPECT_EQ(ParseMemoryLimit("0", "", 8 * kGiB), 8 * kGiB);
}

TEST(MemoryLimit, ThisProcessHasSomeMemory) {
  EXPECT_GT(MemoryThisProcessMayUse(*Env::Default()), 0);
}

}  // namespace
}  // namespace gradsync
