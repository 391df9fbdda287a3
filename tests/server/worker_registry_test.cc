// The coordinator's worker registry: registration, idle selection in
// registration order, heartbeat expiry with explicit times.
#include "server/coordinator/worker_registry.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gradsync {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

std::vector<std::string> Ids(const std::vector<const RegisteredWorker*>& ws) {
  std::vector<std::string> ids;
  for (const RegisteredWorker* w : ws) ids.push_back(w->id);
  return ids;
}

TEST(WorkerRegistryTest, RanksWorkersThatShareAHostNextToEachOther) {
  // Two workers on each of two hosts that joined interleaved, as after a
  // restart: the picked set is the first four to join, ranked host by host.
  WorkerRegistry reg;
  ASSERT_TRUE(reg.Register("h1-0", "10.0.0.11:7000", 0, kT0).ok());
  ASSERT_TRUE(reg.Register("h2-0", "10.0.0.12:7000", 0, kT0).ok());
  ASSERT_TRUE(reg.Register("h1-1", "10.0.0.11:7001", 0, kT0).ok());
  ASSERT_TRUE(reg.Register("h2-1", "10.0.0.12:7001", 0, kT0).ok());
  ASSERT_TRUE(reg.Register("h3-0", "[fd00::3]:7000", 0, kT0).ok());
  EXPECT_EQ(Ids(reg.PickIdle(4)),
            (std::vector<std::string>{"h1-0", "h1-1", "h2-0", "h2-1"}));
  // Who is picked stays registration order: the first three, then ranked.
  EXPECT_EQ(Ids(reg.PickIdle(3)), (std::vector<std::string>{"h1-0", "h1-1", "h2-0"}));
  EXPECT_EQ(Ids(reg.PickIdle(5)),
            (std::vector<std::string>{"h1-0", "h1-1", "h2-0", "h2-1", "h3-0"}));
  reg.Assign("h1-0", "j-1");
  EXPECT_EQ(Ids(reg.PickIdle(3)), (std::vector<std::string>{"h2-0", "h2-1", "h1-1"}));
}

TEST(WorkerRegistryTest, OrderByHostKeepsDistinctOrSharedHostsInOrder) {
  RegisteredWorker a{"a", "127.0.0.1:7003"}, b{"b", "127.0.0.1:7001"},
      c{"c", "127.0.0.1:7002"}, x{"x", "x"}, y{"y", "y:1"};
  // One host (loopback): the order is left alone, whatever the ports.
  EXPECT_EQ(Ids(OrderByHost({&a, &b, &c})), (std::vector<std::string>{"a", "b", "c"}));
  // Every worker on its own host (docker-compose, Kubernetes): the same.
  EXPECT_EQ(Ids(OrderByHost({&y, &x, &a})), (std::vector<std::string>{"y", "x", "a"}));
  // An address without a port is all host.
  RegisteredWorker x2{"x2", "x"};
  EXPECT_EQ(Ids(OrderByHost({&x, &y, &x2})), (std::vector<std::string>{"x", "x2", "y"}));
  EXPECT_TRUE(OrderByHost({}).empty());
}

TEST(WorkerRegistryTest, PicksIdleWorkersInRegistrationOrder) {
  WorkerRegistry reg;
  ASSERT_TRUE(reg.Register("wc", "c:1", 0, kT0).ok());
  ASSERT_TRUE(reg.Register("wa", "a:1", 2, kT0).ok());
  ASSERT_TRUE(reg.Register("wb", "b:1", 0, kT0).ok());
  EXPECT_EQ(Ids(reg.PickIdle(2)), (std::vector<std::string>{"wc", "wa"}));
  EXPECT_TRUE(reg.PickIdle(4).empty());  // fewer idle than asked: none
  reg.Assign("wa", "j-1");
  EXPECT_EQ(Ids(reg.PickIdle(2)), (std::vector<std::string>{"wc", "wb"}));
  EXPECT_TRUE(reg.PickIdle(3).empty());
  EXPECT_EQ(Ids(reg.Live()), (std::vector<std::string>{"wc", "wa", "wb"}));
  EXPECT_EQ(reg.Find("wa")->num_gpus, 2);
  EXPECT_EQ(reg.Find("wa")->peer_address, "a:1");
}

TEST(WorkerRegistryTest, ReleaseFreesOnlyForTheSameJob) {
  WorkerRegistry reg;
  ASSERT_TRUE(reg.Register("w0", "a:1", 0, kT0).ok());
  reg.Assign("w0", "j-2");
  reg.Release("w0", "j-1");  // a late report of an older job
  EXPECT_EQ(reg.Find("w0")->job_id, "j-2");
  reg.Release("w0", "j-2");
  EXPECT_EQ(reg.Find("w0")->job_id, "");
}

TEST(WorkerRegistryTest, RefusesALiveDuplicateAndReplacesADeadOne) {
  WorkerRegistry reg;
  ASSERT_TRUE(reg.Register("w0", "a:1", 0, kT0).ok());
  ASSERT_TRUE(reg.Register("w1", "b:1", 0, kT0).ok());
  EXPECT_EQ(reg.Register("w0", "a:2", 0, kT0).code(), absl::StatusCode::kAlreadyExists);
  const RegisteredWorker* dead = reg.MarkDead("w0");
  ASSERT_NE(dead, nullptr);
  EXPECT_TRUE(dead->dead);
  EXPECT_EQ(reg.MarkDead("w0"), nullptr);  // already dead
  EXPECT_EQ(reg.MarkDead("nobody"), nullptr);
  EXPECT_FALSE(reg.IsLive("w0"));
  EXPECT_EQ(Ids(reg.PickIdle(1)), (std::vector<std::string>{"w1"}));
  // Re-registering makes it live again, last in registration order.
  ASSERT_TRUE(reg.Register("w0", "a:2", 1, kT0).ok());
  EXPECT_EQ(Ids(reg.Live()), (std::vector<std::string>{"w1", "w0"}));
  EXPECT_EQ(reg.Find("w0")->peer_address, "a:2");
}

TEST(WorkerRegistryTest, ExpiresLiveWorkersSilentLongerThanTheTimeout) {
  WorkerRegistry reg;
  ASSERT_TRUE(reg.Register("w0", "a:1", 0, kT0).ok());
  ASSERT_TRUE(reg.Register("w1", "b:1", 0, kT0).ok());
  ASSERT_TRUE(reg.Register("w2", "c:1", 0, kT0).ok());
  reg.Touch("w1", kT0 + absl::Seconds(5));
  reg.MarkDead("w2");
  const absl::Duration timeout = absl::Seconds(6);
  EXPECT_TRUE(reg.Expired(kT0 + absl::Seconds(6), timeout).empty());  // not longer
  EXPECT_EQ(reg.Expired(kT0 + absl::Seconds(7), timeout),
            (std::vector<std::string>{"w0"}));
  EXPECT_EQ(reg.Expired(kT0 + absl::Seconds(12), timeout),
            (std::vector<std::string>{"w0", "w1"}));
  reg.Touch("w2", kT0 + absl::Seconds(12));  // a dead worker stays silent
  EXPECT_EQ(reg.Find("w2")->last_seen, kT0);
}

}  // namespace
}  // namespace gradsync
