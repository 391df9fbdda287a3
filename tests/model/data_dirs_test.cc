#include "worker/model/data_dirs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace gradsync {
namespace {

class DataDirsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gradsync-datadirs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    ASSERT_EQ(mkdir((base_ + "/data").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((base_ + "/data/fashion").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((base_ + "/data-evil").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((base_ + "/other").c_str(), 0755), 0);
  }
  void TearDown() override { std::system(("rm -rf " + base_).c_str()); }
  std::string base_;
};

TEST(DataDirs, SameOrBelowComparesWholeComponents) {
  EXPECT_TRUE(IsSameOrBelow("/data", "/data"));
  EXPECT_TRUE(IsSameOrBelow("/data/x", "/data"));
  EXPECT_FALSE(IsSameOrBelow("/data-evil", "/data"));
  EXPECT_FALSE(IsSameOrBelow("/dat", "/data"));
  EXPECT_TRUE(IsSameOrBelow("/etc", "/"));
}

TEST_F(DataDirsTest, OwnAndAllowedDirectoriesAndBelowAreRead) {
  DataDirPolicy p(base_ + "/data", {base_ + "/other"});
  EXPECT_EQ(*p.Resolve("", 0), base_ + "/data");
  EXPECT_EQ(*p.Resolve(base_ + "/data", 0), base_ + "/data");
  EXPECT_EQ(*p.Resolve(base_ + "/data/fashion/", 0), base_ + "/data/fashion");
  EXPECT_EQ(*p.Resolve(base_ + "/other", 0), base_ + "/other");
}

TEST_F(DataDirsTest, DotDotSymlinkAndPrefixTrickAreRefused) {
  DataDirPolicy p(base_ + "/data", {});
  ASSERT_EQ(symlink("/etc", (base_ + "/data/link").c_str()), 0);
  for (const std::string& bad :
       {base_ + "/data/../other", base_ + "/data/link", base_ + "/data-evil",
        std::string("/etc"), base_ + "/data/missing"}) {
    absl::StatusOr<std::string> r = p.Resolve(bad, 3);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_NE(r.status().message().find("rank 3"), std::string::npos);
    EXPECT_NE(r.status().message().find(bad), std::string::npos);
  }
}

TEST_F(DataDirsTest, AnAllowedDirectoryReachedThroughASymlinkCounts) {
  ASSERT_EQ(symlink((base_ + "/data").c_str(), (base_ + "/alias").c_str()), 0);
  DataDirPolicy p(base_ + "/alias", {});
  EXPECT_EQ(*p.Resolve(base_ + "/data/fashion", 1), base_ + "/data/fashion");
}

TEST(DataDirs, DefaultOwnDirectoryIsTheFashionMnistDefault) {
  DataDirPolicy p("", {});
  EXPECT_EQ(*p.Resolve("", 0), p.own());
  EXPECT_FALSE(p.own().empty());
}

}  // namespace
}  // namespace gradsync
