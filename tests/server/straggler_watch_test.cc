// StragglerWatch (server/coordinator/straggler_watch.h): the rule that names
// a slow rank from cumulative (steps, compute seconds) reports.
#include "server/coordinator/straggler_watch.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gradsync {
namespace {

// Every rank reports `steps_each` more steps; rank r's compute per step is
// per_step[r]. Returns the lines the watch gave, in report order.
std::vector<std::string> Round(StragglerWatch* w, std::vector<double>* compute,
                               std::vector<int64_t>* step,
                               const std::vector<double>& per_step,
                               int64_t steps_each = 10) {
  std::vector<std::string> lines;
  for (int r = 0; r < static_cast<int>(per_step.size()); ++r) {
    (*step)[r] += steps_each;
    (*compute)[r] += per_step[r] * steps_each;
    std::string line = w->Add(r, (*step)[r], (*compute)[r]);
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

struct Ranks {
  explicit Ranks(int n, StragglerWatch::Rule rule = {})
      : watch(rule), compute(n), step(n) {
    watch.Start(n);
    // The first report of each rank only sets its baseline.
    for (int r = 0; r < n; ++r) EXPECT_EQ(watch.Add(r, 0, 0), "");
  }
  std::vector<std::string> Round(const std::vector<double>& per_step) {
    return gradsync::Round(&watch, &compute, &step, per_step);
  }
  StragglerWatch watch;
  std::vector<double> compute;
  std::vector<int64_t> step;
};

TEST(StragglerWatch, ARankTwiceAsSlowIsNamedOnceAfterThreeReportsInARow) {
  Ranks k(4);
  const std::vector<double> slow2 = {0.010, 0.011, 0.020, 0.009};
  EXPECT_TRUE(k.Round(slow2).empty());
  EXPECT_TRUE(k.Round(slow2).empty());
  std::vector<std::string> lines = k.Round(slow2);
  ASSERT_EQ(lines.size(), 1u);
  // The others' median: 0.010 (of 0.009, 0.010, 0.011).
  EXPECT_EQ(lines[0],
            "straggler: rank 2 computes 2.0x the other ranks' median per step "
            "(20.0 ms against 10.0 ms, 3 reports in a row)");
  EXPECT_EQ(k.watch.straggler(), 2);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(k.Round(slow2).empty());  // named once
  const StragglerWatch::Lag lag = k.watch.Slowest();
  EXPECT_EQ(lag.rank, 2);
  EXPECT_NEAR(lag.ratio, 2.0, 1e-9);
  EXPECT_NEAR(lag.others_median, 0.010, 1e-12);
}

TEST(StragglerWatch, EvenRanksAndAnInterruptedRunAreNotNamed) {
  Ranks k(3);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(k.Round({0.010, 0.012, 0.011}).empty());
  // Slow twice, even once, slow twice: never three in a row.
  EXPECT_TRUE(k.Round({0.010, 0.030, 0.010}).empty());
  EXPECT_TRUE(k.Round({0.010, 0.030, 0.010}).empty());
  EXPECT_TRUE(k.Round({0.010, 0.010, 0.010}).empty());
  EXPECT_TRUE(k.Round({0.010, 0.030, 0.010}).empty());
  EXPECT_TRUE(k.Round({0.010, 0.030, 0.010}).empty());
  EXPECT_EQ(k.watch.straggler(), -1);
  // 1.4x stays under the default 1.5x.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(k.Round({0.010, 0.014, 0.010}).empty());
  EXPECT_EQ(k.watch.Slowest().rank, 1);  // the slowest, though not a straggler
}

TEST(StragglerWatch, ARecoveredRankIsNamedAgainWhenItFallsBehindAnew) {
  Ranks k(2, {/*ratio=*/1.5, /*reports=*/2});
  EXPECT_TRUE(k.Round({0.010, 0.030}).empty());
  EXPECT_EQ(k.Round({0.010, 0.030}).size(), 1u);
  EXPECT_EQ(k.watch.straggler(), 1);
  EXPECT_TRUE(k.Round({0.010, 0.010}).empty());
  EXPECT_EQ(k.watch.straggler(), -1);
  EXPECT_TRUE(k.Round({0.010, 0.030}).empty());
  EXPECT_EQ(k.Round({0.010, 0.030}).size(), 1u);
  // Now rank 0 is the slow one. Its first report meets rank 1's old 30 ms
  // (1.3x); rank 1's 10 ms then clears rank 1; two reports at 4x name rank 0.
  EXPECT_TRUE(k.Round({0.040, 0.010}).empty());
  EXPECT_EQ(k.watch.straggler(), -1);
  EXPECT_TRUE(k.Round({0.040, 0.010}).empty());
  const std::vector<std::string> lines = k.Round({0.040, 0.010});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("straggler: rank 0 computes 4.0x", 0), 0u) << lines[0];
}

TEST(StragglerWatch, OneRankReportsWithoutStepsAndRestartsNameNoOne) {
  StragglerWatch one;
  one.Start(1);
  for (int i = 0; i <= 10; ++i) EXPECT_EQ(one.Add(0, 10 * i, 0.5 * i), "");
  EXPECT_EQ(one.Slowest().rank, -1);  // no other rank to compare with

  StragglerWatch w({1.5, 1});
  w.Start(2);
  EXPECT_EQ(w.Add(0, 0, 0), "");
  EXPECT_EQ(w.Add(1, 0, 0), "");
  EXPECT_EQ(w.Add(0, 10, 0.1), "");
  EXPECT_EQ(w.Add(1, 0, 5.0), "");   // no new steps: nothing to measure
  EXPECT_EQ(w.Add(1, 2, 0.0), "");   // compute went back: a new baseline
  EXPECT_EQ(w.Add(7, 10, 9.0), "");  // no such rank
  EXPECT_EQ(w.Add(-1, 10, 9.0), "");
  EXPECT_NE(w.Add(1, 12, 1.0), "");  // (1.0 - 0) / 10 steps = 0.1 s against 0.01 s
  // A job placed again starts from nothing.
  w.Start(2);
  EXPECT_EQ(w.straggler(), -1);
  EXPECT_EQ(w.Slowest().rank, -1);
}

TEST(StragglerWatch, SlowestOfWholeRunsTakesTheMedianOfTheOthers) {
  const StragglerWatch::Lag a = StragglerWatch::SlowestOf({0.01, 0.02, 0.04, 0.03});
  EXPECT_EQ(a.rank, 2);
  EXPECT_NEAR(a.others_median, 0.02, 1e-12);
  EXPECT_NEAR(a.ratio, 2.0, 1e-9);
  EXPECT_EQ(StragglerWatch::SlowestOf({}).rank, -1);
  EXPECT_EQ(StragglerWatch::SlowestOf({0.5}).rank, -1);
  EXPECT_EQ(StragglerWatch::SlowestOf({0.5, -1}).rank, -1);  // rank 1 ran no step
  const StragglerWatch::Lag zero = StragglerWatch::SlowestOf({0, 0});
  EXPECT_EQ(zero.rank, 0);
  EXPECT_DOUBLE_EQ(zero.ratio, 1.0);
}

}  // namespace
}  // namespace gradsync
