// The worker's data sets stay within their byte budget, least recently used
// first (worker/data_cache.h).
#include "worker/data_cache.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace gradsync {
namespace {

// A data set of `n` samples of 1 feature: 5n bytes.
std::shared_ptr<const Dataset> Of(int64_t n) {
  auto d = std::make_shared<Dataset>();
  d->n = n;
  d->features = 1;
  d->images.assign(n, 0.5f);
  d->labels.assign(n, 1);
  return d;
}

TEST(DataCache, KeepsWithinItsBudgetDroppingTheLeastRecentlyUsed) {
  DataCache cache(100);  // room for two of 40 bytes, not three
  cache.Put("a", Of(8));
  cache.Put("b", Of(8));
  EXPECT_EQ(cache.bytes(), 80);
  ASSERT_NE(cache.Get("a"), nullptr);  // a is now more recent than b
  cache.Put("c", Of(8));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.bytes(), 80);
  EXPECT_EQ(cache.Get("b"), nullptr);  // the least recently used went
  EXPECT_NE(cache.Get("a"), nullptr);
  EXPECT_NE(cache.Get("c"), nullptr);
  // One larger than everything may still be used by its job, but is not kept
  // and drops nothing.
  std::shared_ptr<const Dataset> big = Of(21);  // 105 bytes
  cache.Put("big", big);
  EXPECT_EQ(cache.Get("big"), nullptr);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(big->n, 21);
  // Replacing a key counts its bytes once.
  cache.Put("a", Of(12));  // 60 bytes: with c's 40 that is 100, it fits
  EXPECT_EQ(cache.bytes(), 100);
  EXPECT_EQ(cache.Get("a")->n, 12);
  // A data set held by a job outlives its entry.
  std::shared_ptr<const Dataset> held = cache.Get("c");
  cache.Put("d", Of(16));  // 80 bytes: both others go
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(held->n, 8);
}

TEST(DataCache, ABudgetOfZeroKeepsNothing) {
  DataCache cache(0);
  cache.Put("a", Of(1));
  EXPECT_EQ(cache.Get("a"), nullptr);
  EXPECT_EQ(cache.bytes(), 0);
}

}  // namespace
}  // namespace gradsync
