// The transport's words that blame a peer rank, written and read back.
#include "common/spec/peer_blame.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

TEST(PeerBlame, ReadsBackThePeerEachFormNames) {
  for (int peer : {0, 1, 7, 1023}) {
    EXPECT_EQ(BlamedPeerRank(absl::StrCat(CannotReachPeerText(3, peer), ": refused")),
              peer);
    EXPECT_EQ(
        BlamedPeerRank(absl::StrCat("rank 2 (worker w2): ", NoDataFromPeerText(2, peer),
                                    " (10.0.0.1:5) for step 4")),
        peer);
  }
  // The first named, when a message quotes several.
  EXPECT_EQ(BlamedPeerRank(
                absl::StrCat(NoDataFromPeerText(1, 5), "; ", CannotReachPeerText(1, 2))),
            5);
}

TEST(PeerBlame, NamesNoneWhenThereIsNone) {
  for (const char* text :
       {"", "job cancelled", "rank 0 (bad:1) unreachable", "rank 1 cannot reach rank ",
        "rank 1 cannot reach rank x", "rank 1: no data from rank -3",
        "rank 1 cannot reach rank 99999999999999999999"}) {
    EXPECT_EQ(BlamedPeerRank(text), -1) << text;
  }
}

}  // namespace
}  // namespace gradsync
