#include "common/float_env.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <thread>

namespace gradsync {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// Runs in a thread of its own so that the test binary's main thread keeps
// IEEE behaviour for the other tests.
TEST(FloatEnv, FlushingIsInheritedByThreadsStartedAfterwards) {
  bool before = true, inherited = false;
  float product = -1, decayed = -1;
  std::thread outer([&] {
    before = FlushesDenormals();
    FlushDenormalsToZero();
    std::thread inner([&] {
      inherited = FlushesDenormals();
      volatile float subnormal = FLT_MIN / 4;  // DAZ: read as zero
      product = subnormal * 2.0f;
      volatile float m = 1e-30f;  // FTZ: the decay jumps from normal to zero
      for (int i = 0; i < 1000 && m != 0; ++i) {
        m = m * 0.9f;
        if (m != 0 && m < FLT_MIN) break;  // a subnormal result: not flushed
      }
      decayed = m;
    });
    inner.join();
  });
  outer.join();
  EXPECT_FALSE(before) << "threads must start with IEEE subnormals";
  EXPECT_TRUE(inherited);
  EXPECT_EQ(product, 0.0f);
  EXPECT_EQ(decayed, 0.0f);
}

TEST(FloatEnv, WithoutItSubnormalsExist) {  // the control: the test can fail
  float product = 0;
  std::thread t([&] {
    volatile float subnormal = FLT_MIN / 4;
    product = subnormal * 2.0f;
  });
  t.join();
  EXPECT_GT(product, 0.0f);
}
#endif

}  // namespace
}  // namespace gradsync
