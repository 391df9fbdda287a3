// The bucketed training loop: gradients are synchronised bucket by bucket on
// a communication thread while the device is still computing, results are
// applied on the device. Used for device=cuda; runs on the CPU model too
// (which is how CI tests it).
#ifndef GRADSYNC_WORKER_TRAIN_DEVICE_TRAINER_H_
#define GRADSYNC_WORKER_TRAIN_DEVICE_TRAINER_H_

#include <atomic>

#include "worker/model/dataset.h"
#include "worker/model/device_model.h"
#include "worker/sync/gradient_sync.h"
#include "worker/train/trainer.h"

namespace gradsync {

// As RunTraining (same reports, same sampler, same initialisation), with:
//  1. buckets = MakeBuckets(model, spec.bucket_bytes) (last layers first);
//     model->Configure and sync->ConfigureBuckets with them;
//  2. per step t: wait until step t-1's gradient copies are done, then
//     model->ForwardBackward; each bucket_ready(b) queues (t, b) to the
//     communication thread, which copies the bucket to host memory
//     (CopyGradToHost) and calls sync->SyncBucket while backward continues;
//  3. step u's results are applied (device optimizer for averaged gradients,
//     upload for parameters) before step u + depth + 1 computes, depth =
//     sync->pipeline_depth() (ring async: staleness; else 0).
// done.comm_seconds is the communication thread's busy time,
// done.exposed_comm_seconds the training thread's wait for it.
TrainingOutcome RunDeviceTraining(const v1::Assignment& assignment,
                                  const Dataset& train, const Dataset& test,
                                  DeviceModel* model, GradientSync* sync,
                                  TrainingReporter* reporter,
                                  const std::atomic<bool>* cancelled,
                                  const TrainingOptions& options = {});

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_TRAIN_DEVICE_TRAINER_H_
