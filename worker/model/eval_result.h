// What evaluating a model replica on a data set gives, whatever the model
// (the built-in MLP, a TorchScript module) and the device.
#ifndef GRADSYNC_WORKER_MODEL_EVAL_RESULT_H_
#define GRADSYNC_WORKER_MODEL_EVAL_RESULT_H_

#include <cstdint>

namespace gradsync {

// Mean loss and number of correct argmax predictions over n samples.
struct EvalResult {
  double mean_loss = 0;
  int64_t correct = 0;
  int64_t n = 0;
  double accuracy() const { return n ? static_cast<double>(correct) / n : 0; }
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_EVAL_RESULT_H_
