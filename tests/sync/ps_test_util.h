// An in-process PS shard on loopback for the tests of worker/sync/: the
// real PsService over gRPC, with a job key shared by every shard of the
// test binary (assignments and PsCredentials carry secrets from it).
#ifndef GRADSYNC_TESTS_SYNC_PS_TEST_UTIL_H_
#define GRADSYNC_TESTS_SYNC_PS_TEST_UTIL_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/grpc/grpc_util.h"
#include "common/grpc/job_secret.h"
#include "common/metrics/metrics.h"
#include "server/ps/ps_access.h"
#include "server/ps/ps_service.h"
#include "server/ps/ps_store.h"
#include "server/ps/ps_traffic.h"

namespace gradsync {

inline const std::shared_ptr<const JobKey>& TestKey() {
  static const auto* key = new std::shared_ptr<const JobKey>(
      std::make_shared<const JobKey>(*JobKey::Generate()));
  return *key;
}

struct PsServer {
  MetricsRegistry metrics;  // before the service that counts into it
  PsTraffic traffic;        // its counters, for tests to read
  PsStore store;
  PsAccess access{TestKey()};
  std::unique_ptr<PsService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

// `inline_bytes`: PsService's (0: every push on the reduce threads).
inline std::unique_ptr<PsServer> StartPs(size_t inline_bytes = kPsInlineBytes) {
  auto s = std::make_unique<PsServer>();
  s->traffic = RegisterPsTraffic(&s->metrics);
  s->service = std::make_unique<PsService>(&s->store, &s->access, kPsReduceThreads,
                                           s->traffic, inline_bytes);
  auto started = StartServer("127.0.0.1:0", {s->service.get()});
  EXPECT_TRUE(started.ok()) << started.status();
  s->server = std::move(started->server);
  s->address = LocalAddress("127.0.0.1:0", started->port);
  return s;
}

}  // namespace gradsync

#endif  // GRADSYNC_TESTS_SYNC_PS_TEST_UTIL_H_
