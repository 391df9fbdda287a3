// What the collectives' test files share: groups of ranks, running a function
// on every rank's thread, test data and the sum / bit-identity check.
#ifndef GRADSYNC_TESTS_COLLECTIVES_COLLECTIVE_TEST_UTIL_H_
#define GRADSYNC_TESTS_COLLECTIVES_COLLECTIVE_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <vector>

#include "absl/status/status.h"
#include "worker/collectives/allreduce_factory.h"
#include "worker/collectives/testing/transport_group.h"

namespace gradsync {

// Readable transport parameters in gtest's messages.
void PrintTo(TransportKind kind, std::ostream* os);

inline constexpr TransportKind kTransports[] = {TransportKind::kInProc,
                                                TransportKind::kGrpc};

// The group, or nullptr after recording the failure (ADD_FAILURE).
std::unique_ptr<TransportGroup> NewGroup(TransportKind kind, int world,
                                         int connections_per_peer = 1,
                                         WireDtype dtype = WireDtype::kFp32);

// Runs `fn(rank)` for every rank in `ranks` on its own thread; returns their
// statuses in the same order.
std::vector<absl::Status> OnRanks(const std::vector<int>& ranks,
                                  const std::function<absl::Status(int)>& fn);
// 0..world-1.
std::vector<int> AllRanks(int world);

// Small integers as floats: every partial sum is exact whatever the order of
// the additions, so a sum must equal the integer sum exactly.
std::vector<float> IntegerData(int rank, size_t n);
// Values over many binades: sums depend on the order of the additions, so
// replicas agree bit for bit only if every element's sum is computed by the
// same expression on every rank.
std::vector<float> InexactData(int rank, size_t n);

// Runs algos[r]->Run on data made by `make(r, n)` on every rank at once and
// checks every rank: each sum within `tolerance` times the sum of magnitudes
// of the inputs (0 = exact), and every rank's bytes equal to rank 0's.
void RunAndCheck(std::vector<std::unique_ptr<Allreduce>>& algos, size_t n, int64_t step,
                 int bucket, double tolerance,
                 const std::function<std::vector<float>(int, size_t)>& make);

// Runs `algo` (n floats) alone while another thread aborts `transport` after
// 100 ms: Run must return the abort's CANCELLED well before its own timeout.
void ExpectAbortUnblocksRun(Allreduce* algo, Transport* transport, size_t n);

}  // namespace gradsync

#endif  // GRADSYNC_TESTS_COLLECTIVES_COLLECTIVE_TEST_UTIL_H_
