// Fashion-MNIST (IDX, gzip) loading and the sharded, seeded sampler.
#ifndef GRADSYNC_WORKER_MODEL_DATASET_H_
#define GRADSYNC_WORKER_MODEL_DATASET_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace gradsync {

// Images as float32 in [0, 1], row-major [n][features]; labels in [0, classes).
struct Dataset {
  int64_t n = 0;
  int features = 0;  // 784 for Fashion-MNIST
  int classes = 10;
  std::vector<float> images;
  std::vector<uint8_t> labels;

  const float* image(int64_t i) const { return images.data() + i * features; }
};

constexpr char kDefaultFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Loads "<dir>/train-images-idx3-ubyte.gz" + "train-labels-idx1-ubyte.gz"
// (train=true) or the "t10k-" pair (train=false). Reads gzip through zlib;
// also accepts the files without ".gz". Files are opened and read through
// `env` (Env::NewSequentialFile). Errors:
//   NOT_FOUND naming the missing file and suggesting
//     `apt-get install dataset-fashion-mnist` or --data-dir;
//   FAILED_PRECONDITION for a file that is not a regular one (a FIFO, a
//     device);
//   DATA_LOSS on a bad magic number, truncated file or label/image count
//     mismatch.
// `limit` > 0 keeps only the first `limit` samples (tests).
// `cancelled` (may be null): checked before each 4 MiB of images is read and
// decoded; once true the load stops with CANCELLED. A worker's first job
// reads the set here (seconds on a loaded machine), and a job cancelled
// meanwhile must let go of its rank within the runaway grace.
absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, bool train,
                                         int64_t limit = 0,
                                         const Env* env = Env::Default(),
                                         const std::atomic<bool>* cancelled = nullptr);

// Sharded sampler for synchronous data parallelism.
//
// Epoch e uses a permutation of [0, n) drawn from (seed, e) with
// std::mt19937_64 and a Fisher-Yates shuffle that does not depend on the
// standard library's distribution implementation. The global batch of step s
// (0-based within the epoch) is perm[s*G, (s+1)*G) with G = world*batch; rank r
// takes its slice [r*batch, (r+1)*batch). The trailing n % G samples of an
// epoch are dropped, so every rank runs the same number of steps and each
// sample is seen by at most one rank per epoch. Consequently world=N, batch=b
// and world=1, batch=N*b see exactly the same samples per step.
class ShardedSampler {
 public:
  // Step t of an epoch covers permuted samples [t*G, (t+1)*G) of the epoch,
  // G = `global_batch` (0: world * batch); rank r takes the slice
  // [r*G/world, (r+1)*G/world) of it (integer division), `batch` samples
  // each when G = world * batch. An elastic job keeps G when its world
  // changes, so the samples of every step stay the same.
  ShardedSampler(int64_t n, int world, int rank, int batch, uint64_t seed,
                 int64_t global_batch = 0);

  int64_t StepsPerEpoch() const;  // n / G
  // This rank's samples per step (its slice of G).
  int batch() const { return static_cast<int>(end_ - begin_); }

  // Fills `out` (resized to batch()) with the sample indices of this rank
  // for the given step of the given epoch.
  void BatchIndices(int64_t epoch, int64_t step_in_epoch, std::vector<int64_t>* out);

 private:
  void EnsureEpoch(int64_t epoch);

  int64_t n_;
  int world_;
  int rank_;
  int64_t global_;  // G
  int64_t begin_;   // this rank's slice of a step's G samples
  int64_t end_;
  uint64_t seed_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> perm_;
};

}  // namespace gradsync

#endif  // GRADSYNC_WORKER_MODEL_DATASET_H_
