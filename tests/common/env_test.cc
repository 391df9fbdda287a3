// The real Env's clock, sleep and waits return as documented; FakeEnv's
// clock moves only when told, and its waits end on the fake deadline.
#include "common/env.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/testing/fake_env.h"

namespace gradsync {
namespace {

TEST(DefaultEnv, NowIsTheWallClock) {
  const Env* env = Env::Default();
  EXPECT_EQ(env, Env::Default());
  const absl::Time before = absl::Now();
  const absl::Time now = env->Now();
  EXPECT_LE(before, now);
  EXPECT_LE(now, absl::Now());
  const absl::Time m0 = env->NowMonotonic();
  EXPECT_LE(m0, env->NowMonotonic());
}

TEST(DefaultEnv, SleepForSleepsAtLeastThatLong) {
  const Env* env = Env::Default();
  const absl::Time t0 = env->Now();
  env->SleepFor(absl::Milliseconds(20));
  EXPECT_GE(env->Now() - t0, absl::Milliseconds(20));
  env->SleepFor(-absl::Seconds(1));  // returns at once
}

TEST(DefaultEnv, AwaitReturnsWhetherTheConditionHolds) {
  const Env* env = Env::Default();
  absl::Mutex mu;
  bool done = false;
  absl::MutexLock lock(&mu);
  const absl::Time t0 = env->Now();
  EXPECT_FALSE(
      env->AwaitWithTimeout(&mu, absl::Condition(&done), absl::Milliseconds(20)));
  EXPECT_GE(env->Now() - t0, absl::Milliseconds(20));
  done = true;
  EXPECT_TRUE(env->AwaitWithDeadline(&mu, absl::Condition(&done), absl::InfinitePast()));
}

TEST(DefaultEnv, AwaitWakesWhenSignalled) {
  const Env* env = Env::Default();
  absl::Mutex mu;
  bool done = false;
  std::thread setter([&] {
    absl::MutexLock lock(&mu);
    done = true;
  });
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(env->AwaitWithTimeout(&mu, absl::Condition(&done), absl::Seconds(60)));
  }
  setter.join();
}

TEST(DefaultEnv, FilesRoundTrip) {
  const Env* env = Env::Default();
  char dir_template[] = "/tmp/gradsync_env_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string path = std::string(dir_template) + "/f";
  EXPECT_FALSE(env->FileExists(path));
  EXPECT_EQ(env->ReadFileToString(path).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(env->WriteFileAtomically(path, std::string("a\0b", 3)).ok());
  EXPECT_TRUE(env->FileExists(path));
  EXPECT_FALSE(env->FileExists(path + ".tmp"));
  absl::StatusOr<std::string> got = env->ReadFileToString(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string("a\0b", 3));
  ASSERT_TRUE(env->WriteFileAtomically(path, "new").ok());
  EXPECT_EQ(*env->ReadFileToString(path), "new");
  EXPECT_EQ(env->WriteFileAtomically(std::string(dir_template) + "/no/f", "x").code(),
            absl::StatusCode::kInternal);
  std::remove(path.c_str());
  rmdir(dir_template);
}

// A FIFO with no writer, a device that never ends and a directory are
// refused at once by their type: no open that waits, no read that does not
// end (a job's data path may name any of them).
TEST(DefaultEnv, OnlyRegularFilesAreRead) {
  const Env* env = Env::Default();
  char dir_template[] = "/tmp/gradsync_env_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  struct Case {
    std::string path;
    const char* says;
  };
  for (const Case& c : {Case{fifo, "a FIFO"}, Case{"/dev/zero", "a character device"},
                        Case{dir, "a directory"}}) {
    absl::StatusOr<std::string> got = env->ReadFileToString(c.path);
    ASSERT_FALSE(got.ok()) << c.path;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
    EXPECT_NE(got.status().message().find(c.says), std::string::npos) << got.status();
    EXPECT_NE(got.status().message().find(c.path), std::string::npos) << got.status();
    EXPECT_FALSE(env->NewSequentialFile(c.path).ok()) << c.path;
  }
  // A regular file reads to its end in pieces, and its size is known.
  const std::string path = dir + "/f";
  const std::string bytes(10000, 'x');
  ASSERT_TRUE(env->WriteFileAtomically(path, bytes).ok());
  absl::StatusOr<std::unique_ptr<SequentialFile>> f = env->NewSequentialFile(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->size(), bytes.size());
  std::string read;
  char buf[4096];
  while (true) {
    absl::StatusOr<size_t> n = (*f)->Read(buf, sizeof(buf));
    ASSERT_TRUE(n.ok()) << n.status();
    if (*n == 0) break;
    read.append(buf, *n);
  }
  EXPECT_EQ(read, bytes);
  std::remove(path.c_str());
  std::remove(fifo.c_str());
  rmdir(dir_template);
}

TEST(FakeEnv, ClockMovesOnlyWhenTold) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  FakeEnv env(start);
  EXPECT_EQ(env.Now(), start);
  env.Advance(absl::Seconds(3));
  EXPECT_EQ(env.Now(), start + absl::Seconds(3));
  env.Set(start);
  EXPECT_EQ(env.Now(), start);
}

TEST(FakeEnv, SleepForAdvancesWithoutWaiting) {
  FakeEnv env;
  const absl::Time fake0 = env.Now();
  const absl::Time real0 = absl::Now();
  env.SleepFor(absl::Hours(1));
  EXPECT_EQ(env.Now(), fake0 + absl::Hours(1));
  EXPECT_LT(absl::Now() - real0, absl::Seconds(30)) << "it slept";
  env.SleepFor(-absl::Seconds(1));
  EXPECT_EQ(env.Now(), fake0 + absl::Hours(1)) << "negative sleeps are no-ops";
}

TEST(FakeEnv, AwaitFailsExactlyWhenTheFakeClockPassesTheDeadline) {
  FakeEnv env;
  const absl::Time deadline = env.Now() + absl::Seconds(10);
  absl::Mutex mu;
  bool done = false;
  bool waiting = false;
  bool result = true;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    waiting = true;
    result = env.AwaitWithDeadline(&mu, absl::Condition(&done), deadline);
    waiting = false;
  });
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&waiting));
  }
  env.Advance(absl::Seconds(10) - absl::Nanoseconds(1));
  {
    // Real time passes; the fake deadline has not: still waiting.
    absl::MutexLock lock(&mu);
    const auto stopped = [&] { return !waiting; };
    EXPECT_FALSE(mu.AwaitWithTimeout(absl::Condition(&stopped), absl::Milliseconds(50)));
  }
  env.Advance(absl::Nanoseconds(1));
  waiter.join();
  EXPECT_FALSE(result);
}

TEST(FakeEnv, AwaitReturnsTrueAsSoonAsTheConditionHolds) {
  FakeEnv env;
  absl::Mutex mu;
  bool done = false;
  bool result = false;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    result = env.AwaitWithTimeout(&mu, absl::Condition(&done), absl::Seconds(1));
  });
  {
    absl::MutexLock lock(&mu);
    done = true;
  }
  waiter.join();  // no clock movement needed
  EXPECT_TRUE(result);
  EXPECT_EQ(env.Now(), FakeEnv().Now());

  absl::MutexLock lock(&mu);
  EXPECT_TRUE(env.AwaitWithDeadline(&mu, absl::Condition(&done), absl::InfinitePast()))
      << "a condition that holds wins over a passed deadline";
}

}  // namespace
}  // namespace gradsync
