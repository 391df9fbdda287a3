#include "worker/model/cpu_threads.h"

#include <gtest/gtest.h>

namespace gradsync {
namespace {

TEST(CpuComputeThreads, LeavesACorePerRankAndSharesTheRest) {
  EXPECT_EQ(CpuComputeThreads(16, 1), 15);
  EXPECT_EQ(CpuComputeThreads(16, 4), 3);
  EXPECT_EQ(CpuComputeThreads(16, 8), 1);
  EXPECT_EQ(CpuComputeThreads(16, 5), 2);  // (16 - 5) / 5, rounded down
  EXPECT_EQ(CpuComputeThreads(2, 1), 1);
  EXPECT_EQ(CpuComputeThreads(2, 4), 1);  // more ranks than cores: still 1
  EXPECT_EQ(CpuComputeThreads(0, 0), 1);  // unknown core count
  EXPECT_EQ(CpuComputeThreads(-3, 2), 1);
}

TEST(BlasThreads, SetChangesTheProcessPoolAndZeroLeavesItAlone) {
  SetBlasThreads(1);
  EXPECT_EQ(BlasThreads(), 1);
  SetBlasThreads(0);  // no-op
  EXPECT_EQ(BlasThreads(), 1);
  SetBlasThreads(2);
  EXPECT_EQ(BlasThreads(), 2);
}

}  // namespace
}  // namespace gradsync
