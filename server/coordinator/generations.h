// The generations of an elastic job (JobSpec.elastic, docs/operations.md
// "Elastic jobs"): the record each one leaves in Job.generations (its
// ranks, where it started and ended, why, whether it committed, the steps
// the next one redid), its data-plane id, and the coordinator's lane of the
// job's timeline. The control flow that ends and places generations is the
// job table's (job_table_elastic.cc); this is the bookkeeping it does it
// with. Plain logic: no clock (times are passed in), no I/O.
#ifndef GRADSYNC_SERVER_COORDINATOR_GENERATIONS_H_
#define GRADSYNC_SERVER_COORDINATOR_GENERATIONS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "gradsync/v1/gradsync.pb.h"

namespace gradsync {

// The data-plane id of generation `generation` of job `job_id`: the job id
// for generation 0, "<job_id>.g<generation>" after (PS slices, peer streams,
// checkpoints and secrets of one generation are never another's).
std::string GenerationJobId(const std::string& job_id, int generation);
// The job id and generation of a data-plane id (generation 0 for a plain id).
std::pair<std::string, int> SplitGenerationJobId(const std::string& data_plane_id);

// A view of one job's generation records; the job outlives it.
class Generations {
 public:
  // The threads of the coordinator's lane of the timeline (Trace).
  static constexpr int kGenerationsThread = 0;
  static constexpr int kReformationsThread = 1;

  explicit Generations(v1::Job* job) : job_(job) {}

  // The newest generation of `job` that committed (its starting state is
  // checkpointed: the next one starts from it), or -1.
  static int Committed(const v1::Job& job);
  // The ranks of generation `g` of `job` (0 when it has no record).
  static int World(const v1::Job& job, int g);
  // The coordinator's lane (rank -1) of the job's timeline: one span per
  // generation and per re-formation, an instant where each generation
  // ended; the running generation's span ends at `now_ms`.
  static v1::WorkerTrace Trace(const v1::Job& job, int64_t now_ms);

  // The record of generation `g`, or nullptr.
  v1::JobGeneration* Find(int g) const;

  // Opens the record of the job's current generation, placed on
  // job.workers() at `now_ms`.
  void Start(int64_t now_ms);
  // Closes the current generation's record: it ended at `now_ms` because of
  // `why`, losing `lost_worker` at `lost_rank` ("" and -1: none). A
  // generation that never committed trained no step of its own (it ends at
  // its start step); one that did ends at the job's step.
  void End(const std::string& why, const std::string& lost_worker, int lost_rank,
           int64_t now_ms);
  // How many generations in a row, newest first, made no progress: never
  // committed, or ended at the step they started from (issue 51: a member
  // that no peer can reach let each generation commit its start and fail
  // its first step, 60 times over). The running generation counts only
  // while it has not committed.
  int WithoutProgressInARow() const;
  // Rank 0's first report of the current generation, at `step`: it is
  // committed, and (after a re-formation that took `reform_seconds`) its
  // steps redone are known. Returns the line to log and record, or "" when
  // it was committed already (or has no record).
  std::string Commit(int64_t step, double reform_seconds);
  // JobDone of rank `d.rank()` of an ended generation, held by `worker_id`:
  // its step count moves that generation's end step forward (rank 0's
  // progress reports lag) and with it the next one's steps redone. Returns
  // whether it changed anything.
  bool EndedRankDone(const std::string& worker_id, const v1::WorkerMessage::JobDone& d);

 private:
  // Sets every committed generation's steps_redone from the end step of
  // the committed generation before it.
  void UpdateStepsRedone();

  v1::Job* const job_;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_GENERATIONS_H_
