// The job table's stall reports (see job_table.h): a worker that waited past
// its job's stall threshold for a peer or PS shard says so before the step
// timeout fails the job; the report becomes a job event and a line of the
// job's status.
#include <utility>

#include <spdlog/spdlog.h>

#include "common/spec/job_spec.h"
#include "server/coordinator/job_table.h"

namespace gradsync {

void JobTable::HandleStall(const std::string& worker_id,
                           const v1::WorkerMessage::Stall& s, Decisions* out) {
  JobEntry* e = RankEntry(s.job_id(), s.rank(), worker_id);
  // After the job ended, its status keeps what it was waiting for then.
  if (e == nullptr || e->job.state() != v1::RUNNING) return;
  const std::string text = StallText(s);
  if (s.resolved()) {
    spdlog::info("[{}] {}", e->job.id(), text);
  } else {
    spdlog::warn("[{}] {}", e->job.id(), text);
  }
  e->stalls[s.rank()] = text;
  e->job.clear_stalls();
  for (const auto& [rank, line] : e->stalls) e->job.add_stalls(line);
  v1::JobEvent ev = NewEvent(e, v1::JobEvent::STALL, s.step());
  ev.set_message(text);
  AddEvent(e, std::move(ev));
  out->events_changed = true;
}

}  // namespace gradsync
