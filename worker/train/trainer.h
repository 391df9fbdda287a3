// worker/train: the one data-parallel training loop of a rank, its step plan
// and its reports. Strategy-, mode- and device-agnostic.
#ifndef GRADSYNC_WORKER_TRAIN_TRAINER_H_
#define GRADSYNC_WORKER_TRAIN_TRAINER_H_

#include <atomic>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/spec/job_options.h"
#include "worker/model/dataset.h"
#include "worker/model/device_model.h"
#include "worker/sync/gradient_sync.h"
#include "worker/train/training_outcome.h"

namespace gradsync {

// Runs `job` on this rank, on `model` (any device):
//  1. buckets = MakeBuckets(model, spec.bucket_bytes), last layers first;
//     the model gets them, the job's optimizer and depth + 2 gradient slots;
//  2. params = the model's deterministic init from the job seed;
//     sync->Initialize(buckets, params) makes them the job's common initial
//     values, which go to the model; their checksum goes into the first
//     Progress report;
//  3. per step t (this rank's shard of the global batch, ShardedSampler):
//     a. enqueue forward/backward; each bucket_ready(b) starts the bucket's
//        copy into slot t % K (model->StartGradCopy) and queues (t, b) to the
//        communication threads (CommPipeline), which wait for the copy and
//        call sync->SyncBucket while backward continues;
//     b. stage batch t+1 (the device may still be computing t);
//     c. take step t-1's loss and report it (a step late, so the host does
//        not wait for the step it just enqueued);
//     d. apply step u = t - depth (depth = sync->pipeline_depth()): the
//        device optimizer for averaged gradients, an upload for parameters;
//        when sync->checkpointer() says a checkpoint is due after u + 1
//        steps, the model's parameters and optimizer state are copied to
//        its host buffer and sent in the background (ring jobs; a resumed
//        one loaded its optimizer state in 2);
//  4. per epoch EpochDone (rank 0 with test accuracy, on the parameters the
//     step's report sees), Progress every progress_interval;
//  5. the remaining steps are applied, sync->Finish(params), final checksum
//     and (rank 0) test accuracy.
// `cancelled` is polled between steps; a cancelled or failed run aborts the
// sync so that peers blocked on us are released.
//
// Times in done (and in Progress reports, cumulative):
//  - comm_seconds: the communication threads' busy time (waiting for the
//    device-to-host copies plus synchronising every bucket), whether or not
//    it overlapped computation;
//  - exposed_comm_seconds: the time the training thread waited for
//    communication (the part that did not overlap);
//  - compute_seconds: the loop's wall time less exposed_comm_seconds and
//    test-set evaluation.
TrainingOutcome RunTraining(const JobOptions& job, const Dataset& train,
                            const Dataset& test, DeviceModel* model, GradientSync* sync,
                            TrainingReporter* reporter,
                            const std::atomic<bool>* cancelled,
                            const TrainingOptions& options = {});

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_TRAIN_TRAINER_H_
