// What the job table's tests share: a clock that moves only when told, a
// small valid job spec and a rank's JobDone.
#ifndef GRADSYNC_TESTS_SERVER_JOB_TABLE_TEST_UTIL_H_
#define GRADSYNC_TESTS_SERVER_JOB_TABLE_TEST_UTIL_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gradsync/v1/gradsync.pb.h"
#include "server/coordinator/clock.h"

namespace gradsync {

inline constexpr char kModel[] = "mlp:784-10";  // 7850 parameters
inline constexpr size_t kModelParams = 784 * 10 + 10;

class FakeClock final : public Clock {
 public:
  absl::Time Now() const override { return now_; }
  void Advance(absl::Duration d) { now_ += d; }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
};

// A sync job of `workers` ranks on kModel, 100 steps.
inline v1::JobSpec Spec(v1::Strategy strategy, int workers) {
  v1::JobSpec s;
  s.set_strategy(strategy);
  s.set_mode(v1::SYNC_MODE_SYNC);
  s.set_workers(workers);
  s.set_model(kModel);
  s.set_batch_size(32);
  s.set_steps(100);
  return s;
}

// Rank `rank`'s JobDone for `job`: `status`, checksum "c0ffee", 100 steps.
inline v1::WorkerMessage::JobDone Done(const std::string& job, int rank,
                                       absl::Status status = absl::OkStatus()) {
  v1::WorkerMessage::JobDone d;
  d.set_job_id(job);
  d.set_rank(rank);
  d.set_code(static_cast<int>(status.code()));
  d.set_error(std::string(status.message()));
  d.set_param_checksum("c0ffee");
  d.set_steps(100);
  return d;
}

}  // namespace gradsync

#endif  // GRADSYNC_TESTS_SERVER_JOB_TABLE_TEST_UTIL_H_
