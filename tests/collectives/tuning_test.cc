// The allreduce tuning table: file format, lookup at its boundaries, the
// built-in table, and kAuto in MakeAllreduce.
#include "common/spec/tuning_table.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "common/spec/job_spec.h"
#include "worker/collectives/allreduce_factory.h"
#include "worker/collectives/testing/transport_group.h"

namespace gradsync {
namespace {

constexpr uint64_t kKiB = 1 << 10;
constexpr uint64_t kMiB = 1 << 20;

TuningTable MustParse(const std::string& text) {
  auto t = TuningTable::Parse(text, "test");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : *TuningTable::Parse("* inf ring", "fallback");
}

// The error of parsing `text`, which must fail with INVALID_ARGUMENT.
std::string ParseError(const std::string& text) {
  auto t = TuningTable::Parse(text, "t.txt");
  EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << text << ": " << t.status();
  return std::string(t.status().message());
}

TEST(TuningTableParse, CommentsBlankLinesTabsAndSuffixes) {
  TuningTable t = MustParse(
      "# a comment\n"
      "\n"
      "4\t64KiB\ttree   # trailing comment\n"
      "4 2MiB hd\n"
      "  4   inf   ring\n"
      "* 1GiB hier\n"
      "* 1000 tree\r\n");  // CRLF line ends are fine
  ASSERT_EQ(t.rules().size(), 5u);
  // Sorted: exact worlds first, then '*', each by max_bytes.
  EXPECT_EQ(t.rules()[0].world, 4);
  EXPECT_EQ(t.rules()[0].max_bytes, 64 * kKiB);
  EXPECT_EQ(t.rules()[2].max_bytes, UINT64_MAX);
  EXPECT_EQ(t.rules()[3].world, 0);
  EXPECT_EQ(t.rules()[3].max_bytes, 1000u);
  EXPECT_EQ(t.rules()[4].max_bytes, 1024 * kMiB);
  EXPECT_EQ(t.rules()[4].algorithm, AllreduceAlgorithm::kHierarchical);
}

TEST(TuningTableParse, ErrorsNameTheSourceAndLine) {
  std::string e = ParseError("# header\n4 64KiB tree\n4 64KiB\n");
  EXPECT_TRUE(absl::StartsWith(e, "t.txt:3: ")) << e;
  EXPECT_NE(e.find("field"), std::string::npos) << e;

  e = ParseError("0 1 ring\n");
  EXPECT_TRUE(absl::StartsWith(e, "t.txt:1: ")) << e;
  EXPECT_NE(e.find("WORLD"), std::string::npos) << e;
  EXPECT_TRUE(absl::StartsWith(ParseError("\nabc 1 ring\n"), "t.txt:2: "));
  EXPECT_TRUE(absl::StartsWith(ParseError("99999 1 ring\n"), "t.txt:1: "));

  for (const char* bytes : {"12KB", "-1", "1.5MiB", "KiB", "99999999999GiB"}) {
    e = ParseError(std::string("4 ") + bytes + " ring\n");
    EXPECT_NE(e.find("MAX_BYTES"), std::string::npos) << bytes << ": " << e;
  }
  for (const char* algo : {"auto", "bogus", "RING"}) {
    e = ParseError(std::string("4 1 ") + algo + "\n");
    EXPECT_NE(e.find("ALGORITHM"), std::string::npos) << algo << ": " << e;
  }
  e = ParseError("4 1MiB ring\n* 1 tree\n4 1024KiB hd\n");
  EXPECT_TRUE(absl::StartsWith(e, "t.txt:3: ")) << e;
  EXPECT_NE(e.find("line 1"), std::string::npos) << e;

  e = ParseError("# only comments\n\n");
  EXPECT_NE(e.find("no rules"), std::string::npos) << e;
}

TEST(TuningTableChoose, ExactWorldThenAnyWorldThenRing) {
  TuningTable t = MustParse(
      "4 64KiB tree\n"
      "4 2MiB hd\n"
      "* 1KiB tree\n"
      "* 8MiB hier\n");
  EXPECT_EQ(t.Choose(4, 0), AllreduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(t.Choose(4, 64 * kKiB), AllreduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(t.Choose(4, 64 * kKiB + 1), AllreduceAlgorithm::kHalvingDoubling);
  EXPECT_EQ(t.Choose(4, 2 * kMiB), AllreduceAlgorithm::kHalvingDoubling);
  // Beyond world 4's rules, the '*' rules apply, then the ring.
  EXPECT_EQ(t.Choose(4, 2 * kMiB + 1), AllreduceAlgorithm::kHierarchical);
  EXPECT_EQ(t.Choose(4, 8 * kMiB + 1), AllreduceAlgorithm::kRing);
  EXPECT_EQ(t.Choose(3, kKiB), AllreduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(t.Choose(3, kKiB + 1), AllreduceAlgorithm::kHierarchical);
  EXPECT_EQ(t.Choose(3, UINT64_MAX), AllreduceAlgorithm::kRing);
}

TEST(TuningTableDefault, ParsesAndFollowsTheCostModel) {
  const TuningTable& t = TuningTable::Default();
  EXPECT_EQ(t.Choose(1, 1), AllreduceAlgorithm::kRing);
  EXPECT_EQ(t.Choose(1, UINT64_MAX), AllreduceAlgorithm::kRing);
  EXPECT_EQ(t.Choose(2, kMiB), AllreduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(t.Choose(2, kMiB + 1), AllreduceAlgorithm::kRing);
  for (int world : {4, 8, 16, 32, 64}) {
    EXPECT_EQ(t.Choose(world, 4), AllreduceAlgorithm::kRecursiveDoubling) << world;
    EXPECT_EQ(t.Choose(world, 64 * kKiB), AllreduceAlgorithm::kRecursiveDoubling)
        << world;
    EXPECT_EQ(t.Choose(world, 64 * kKiB + 1), AllreduceAlgorithm::kHalvingDoubling)
        << world;
    EXPECT_EQ(t.Choose(world, 1024 * kMiB), AllreduceAlgorithm::kRing) << world;
  }
  EXPECT_EQ(t.Choose(4, 1536 * kKiB), AllreduceAlgorithm::kHalvingDoubling);
  EXPECT_EQ(t.Choose(4, 1536 * kKiB + 1), AllreduceAlgorithm::kRing);
  EXPECT_EQ(t.Choose(8, 4 * kMiB + 1), AllreduceAlgorithm::kRing);
  // Not powers of two, and powers of two beyond the listed ones.
  for (int world : {3, 5, 6, 7, 12, 128}) {
    EXPECT_EQ(t.Choose(world, 32 * kKiB), AllreduceAlgorithm::kRecursiveDoubling)
        << world;
    EXPECT_EQ(t.Choose(world, 32 * kKiB + 1), AllreduceAlgorithm::kRing) << world;
  }
  // ToString round-trips.
  auto again = TuningTable::Parse(t.ToString(), "round trip");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ToString(), t.ToString());
}

TEST(TuningTableLoad, MissingFileIsNotFoundAndErrorsNameThePath) {
  auto missing = TuningTable::Load("/nonexistent/gradsync-tuning.txt");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("/nonexistent/gradsync-tuning.txt"),
            absl::string_view::npos);

  const std::string path = ::testing::TempDir() + "/gradsync_tuning_test_table.txt";
  {
    std::ofstream out(path);
    out << "# written by a test\n8 1MiB hd\n* inf ring\n";
  }
  auto good = TuningTable::Load(path);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->Choose(8, kMiB), AllreduceAlgorithm::kHalvingDoubling);
  {
    std::ofstream out(path);
    out << "8 1MiB hd\n8 lots ring\n";
  }
  auto bad = TuningTable::Load(path);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_TRUE(absl::StartsWith(bad.status().message(), path + ":2: ")) << bad.status();
  std::remove(path.c_str());
}

// ---------------------------------------------------------------- factory

TEST(AutoAllreduce, RunsWhatTheTableChooses) {
  auto group = TransportGroup::Create(TransportKind::kInProc, 4);
  ASSERT_TRUE(group.ok()) << group.status();
  TuningTable t = MustParse("4 400 hd\n4 4000 hier\n* inf tree\n");
  AllreduceOptions opts;
  opts.tuning = &t;
  Transport* tr = (*group)->transport(0);
  auto expect = [&](AllreduceAlgorithm algorithm, size_t count, AllreduceAlgorithm want) {
    auto a = MakeAllreduce(algorithm, tr, count, opts);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ((*a)->algorithm(), want) << "count " << count;
  };
  expect(AllreduceAlgorithm::kAuto, 100, AllreduceAlgorithm::kHalvingDoubling);  // 400 B
  expect(AllreduceAlgorithm::kAuto, 101, AllreduceAlgorithm::kHierarchical);
  expect(AllreduceAlgorithmOf(v1::ALGORITHM_UNSPECIFIED), 1000,
         AllreduceAlgorithm::kHierarchical);
  expect(AllreduceAlgorithm::kAuto, 1001, AllreduceAlgorithm::kRecursiveDoubling);
  // A named algorithm ignores the table.
  expect(AllreduceAlgorithm::kRing, 100, AllreduceAlgorithm::kRing);
  // nullptr: the built-in table.
  opts.tuning = nullptr;
  expect(AllreduceAlgorithm::kAuto, 16, AllreduceAlgorithm::kRecursiveDoubling);
  expect(AllreduceAlgorithm::kAuto, 100000, AllreduceAlgorithm::kHalvingDoubling);
  expect(AllreduceAlgorithm::kAuto, 10 << 20, AllreduceAlgorithm::kRing);
  // Bad groups still fail when the table picks hierarchical.
  opts.tuning = &t;
  opts.groups = {0, 0};
  auto bad = MakeAllreduce(AllreduceAlgorithm::kAuto, tr, 1000, opts);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
}

}  // namespace
}  // namespace gradsync
