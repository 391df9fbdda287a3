#include "worker/collectives/transport/grpc/peer_mailboxes.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/job_secret.h"

namespace gradsync {
namespace {

// How often the reaper looks for overdue admission waits.
constexpr absl::Duration kReaperPeriod = absl::Milliseconds(200);

size_t FrameBytes(const DecodedFrame& f) { return f.count() * sizeof(float); }

absl::Status Ended(const std::string& job_id) {
  return absl::FailedPreconditionError(
      absl::StrCat("job ", job_id, " has ended on this worker"));
}

}  // namespace

// ---------------------------------------------------------------- JobMailbox

absl::StatusOr<Delivery> JobMailbox::Push(DecodedFrame frame, Resume resume) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  Source& s = sources_[{frame.header().rank(), frame.header().lane()}];
  s.bytes += FrameBytes(frame);
  s.frames.push_back(std::move(frame));
  if (s.frames.size() < kMailboxFrames && s.bytes < kMailboxBytes) {
    return Delivery::kTaken;
  }
  s.parked = std::move(resume);
  return Delivery::kParked;
}

absl::StatusOr<DecodedFrame> JobMailbox::Pop(int src, int lane, absl::Time deadline) {
  Resume wake;
  absl::StatusOr<DecodedFrame> out;
  {
    absl::MutexLock lock(&mu_);
    const std::pair<int, int> key{src, lane};
    auto ready = [this, &key]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (!error_.ok()) return true;
      auto it = sources_.find(key);
      return it != sources_.end() && !it->second.frames.empty();
    };
    if (!env_->AwaitWithDeadline(&mu_, absl::Condition(&ready), deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat("no data from rank ", src, " before the step timeout"));
    }
    if (!error_.ok()) return error_;
    Source& s = sources_[key];
    out = std::move(s.frames.front());
    s.frames.pop_front();
    s.bytes -= FrameBytes(*out);
    if (s.parked && s.frames.size() < kMailboxFrames && s.bytes < kMailboxBytes) {
      wake = std::move(s.parked);
      s.parked = nullptr;
    }
  }
  if (wake) wake(absl::OkStatus());  // outside the lock: it starts a read
  return out;
}

void JobMailbox::Fail(const absl::Status& status) {
  std::vector<Resume> wake;
  {
    absl::MutexLock lock(&mu_);
    if (error_.ok()) error_ = status;
    for (auto& [src, s] : sources_) {
      if (s.parked) wake.push_back(std::move(s.parked));
    }
    sources_.clear();
  }
  for (Resume& r : wake) r(status);
}

// ---------------------------------------------------------------- PeerMailboxes

PeerMailboxes::PeerMailboxes(const Env* env)
    : env_(env), reaper_([this] { ReaperLoop(); }) {}

PeerMailboxes::~PeerMailboxes() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  reaper_.join();
}

void PeerMailboxes::ReaperLoop() {
  while (true) {
    std::vector<Waiting> expired;
    bool stop;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), kReaperPeriod);
      stop = stop_;
      const absl::Time now = env_->Now();
      for (auto it = waiting_.begin(); it != waiting_.end();) {
        if (!stop && it->until > now) {
          ++it;
          continue;
        }
        expired.push_back(std::move(*it));
        it = waiting_.erase(it);
      }
    }
    for (Waiting& w : expired) {
      w.admit(
          stop ? absl::UnavailableError("worker shutting down")
               : absl::NotFoundError(absl::StrCat(
                     "job ", w.creds.job_id, " did not start on this worker in time")));
    }
    if (stop) return;
  }
}

absl::StatusOr<std::shared_ptr<JobMailbox>> PeerMailboxes::Check(
    const Job& job, const PeerCredentials& creds) {
  if (job.secret.empty() || !SecretsEqual(job.secret, creds.secret) || creds.rank < 0 ||
      creds.rank >= job.world) {
    return absl::PermissionDeniedError(
        absl::StrCat("not a member of job ", creds.job_id, " (or not one of its ranks)"));
  }
  return job.box;
}

std::vector<PeerMailboxes::Waiting> PeerMailboxes::TakeWaiting(
    const std::string& job_id) {
  std::vector<Waiting> out;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->creds.job_id != job_id) {
      ++it;
      continue;
    }
    out.push_back(std::move(*it));
    it = waiting_.erase(it);
  }
  return out;
}

std::shared_ptr<JobMailbox> PeerMailboxes::Open(const std::string& job_id,
                                                const std::string& secret, int world) {
  std::shared_ptr<JobMailbox> box;
  std::vector<Waiting> ready;
  {
    absl::MutexLock lock(&mu_);
    Job& job = open_[job_id];
    if (!job.box) {
      job.box = std::make_shared<JobMailbox>(env_);
      job.secret = secret;
      job.world = world;
      if (closed_.count(job_id)) job.box->Fail(Ended(job_id));
    }
    box = job.box;
    ready = TakeWaiting(job_id);
  }
  Job job{box, secret, world};
  for (Waiting& w : ready) w.admit(Check(job, w.creds));
  return box;
}

void PeerMailboxes::Close(const std::string& job_id, const absl::Status& why) {
  std::shared_ptr<JobMailbox> box;
  std::vector<Waiting> refused;
  {
    absl::MutexLock lock(&mu_);
    if (closed_.insert(job_id).second) {
      closed_order_.push_back(job_id);
      if (closed_order_.size() > kMaxClosedJobs) {
        closed_.erase(closed_order_.front());
        closed_order_.pop_front();
      }
    }
    auto it = open_.find(job_id);
    if (it != open_.end()) {
      box = std::move(it->second.box);
      open_.erase(it);
    }
    refused = TakeWaiting(job_id);
  }
  if (box) box->Fail(why);
  for (Waiting& w : refused) w.admit(Ended(job_id));
}

void PeerMailboxes::Admit(const PeerCredentials& creds, AdmitFn admit) {
  absl::StatusOr<std::shared_ptr<JobMailbox>> answer;
  {
    absl::MutexLock lock(&mu_);
    auto it = open_.find(creds.job_id);
    if (creds.job_id.empty() || creds.secret.empty()) {
      answer = absl::PermissionDeniedError(
          "a Peer stream must name its job, rank and the job's secret");
    } else if (it != open_.end()) {
      answer = Check(it->second, creds);
    } else if (closed_.count(creds.job_id)) {
      answer = Ended(creds.job_id);
    } else if (waiting_.size() >= kMaxWaitingStreams) {
      answer = absl::ResourceExhaustedError(
          absl::StrCat("too many streams wait for jobs not started on this worker (",
                       kMaxWaitingStreams, "); refusing job ", creds.job_id));
    } else {
      waiting_.push_back({creds, std::move(admit), env_->Now() + kAdmitWait});
      return;
    }
  }
  admit(std::move(answer));
}

size_t PeerMailboxes::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_.size();
}

}  // namespace gradsync
