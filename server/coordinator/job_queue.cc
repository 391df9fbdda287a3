#include "server/coordinator/job_queue.h"

namespace gradsync {

bool JobQueue::Reserves(const JobEntry& e) const {
  return e.backfill_passes >= kMaxBackfillPasses ||
         env_->Now() - e.queued >= kBackfillReserveAfter;
}

void JobQueue::Schedule(const Place& place) {
  const int registered = static_cast<int>(workers_->Live().size());
  JobEntry* head = nullptr;
  for (auto it = ids_.begin(); it != ids_.end();) {
    auto found = jobs_->find(*it);
    JobEntry* e = found == jobs_->end() ? nullptr : &found->second;
    // 1.
    if (e == nullptr || e->job.state() != v1::QUEUED) {
      it = ids_.erase(it);
      continue;
    }
    // 2.
    std::vector<const RegisteredWorker*> picked =
        workers_->PickIdle(e->job.spec().workers());
    if (!picked.empty()) {
      it = ids_.erase(it);
      if (head != nullptr) ++head->backfill_passes;
      place(e, picked);
      continue;
    }
    // 3.
    if (head == nullptr && e->job.spec().workers() <= registered) {
      head = e;
      if (Reserves(*e)) break;
    }
    ++it;
  }
}

}  // namespace gradsync
