// The rate limit of refusal logs: a flood of bad calls writes at most
// kLines lines per window, and the next window says how many were left out.
#include "common/grpc/refusal_log.h"

#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace gradsync {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(RefusalLog, ALineNamesWhatWhoAndWhy) {
  RefusalLog log;
  EXPECT_EQ(log.Line("PS Pull", "ipv4:10.0.0.7:51234", "not a member of job j-1", kT0),
            "refused PS Pull from ipv4:10.0.0.7:51234: not a member of job j-1");
}

TEST(RefusalLog, AFloodIsCutToKLinesPerWindowAndCountedInTheNext) {
  RefusalLog log;
  int logged = 0;
  for (int i = 0; i < 1000; ++i) {
    if (log.Line("a call", "ipv4:1.2.3.4:5", "no", kT0 + absl::Milliseconds(i))) {
      ++logged;
    }
  }
  EXPECT_EQ(logged, RefusalLog::kLines);
  std::optional<std::string> next =
      log.Line("a call", "ipv4:1.2.3.4:5", "no", kT0 + RefusalLog::kWindow);
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(absl::EndsWith(*next, absl::StrCat("(", 1000 - RefusalLog::kLines,
                                                 " earlier refusals not logged)")))
      << *next;
  // The count is reported once.
  next = log.Line("a call", "ipv4:1.2.3.4:5", "no", kT0 + 2 * RefusalLog::kWindow);
  ASSERT_TRUE(next.has_value());
  EXPECT_FALSE(absl::StrContains(*next, "not logged")) << *next;
}

TEST(RefusalLog, WhatTheCallerSentIsEscapedAndCut) {
  RefusalLog log;
  const std::string forged = "j-1's\nrefused nothing";  // quotes stay
  std::optional<std::string> line =
      log.Line("Peer stream", "ipv4:1.2.3.4:5",
               "not a member of job " + forged + std::string(10000, 'x'), kT0);
  ASSERT_TRUE(line.has_value());
  EXPECT_FALSE(absl::StrContains(*line, "\n")) << *line;
  EXPECT_TRUE(absl::StrContains(*line, "j-1's\\x0arefused nothing")) << *line;
  EXPECT_LT(line->size(), 400u);
  EXPECT_TRUE(absl::EndsWith(*line, "...")) << *line;
}

}  // namespace
}  // namespace gradsync
