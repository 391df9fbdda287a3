#include "worker/model/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gradsync {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
// Sanity bound on a header's image size so a corrupt header cannot make us
// allocate absurd amounts before noticing the file is short.
constexpr uint32_t kMaxDim = 1 << 12;

// Resolves "<dir>/<base>.gz", falling back to "<dir>/<base>" (uncompressed).
absl::StatusOr<std::string> FindFile(const std::string& dir, const std::string& base,
                                     const Env* env) {
  const std::string gz = absl::StrCat(dir, "/", base, ".gz");
  if (env->FileExists(gz)) return gz;
  const std::string raw = absl::StrCat(dir, "/", base);
  if (env->FileExists(raw)) return raw;
  return absl::NotFoundError(
      absl::StrCat("Fashion-MNIST file not found: ", gz, " (nor ", raw,
                   "). Install it with `apt-get install dataset-fashion-mnist` or point "
                   "--data-dir at a directory holding the IDX files."));
}

// A file read through the Env, gunzipped when it starts with gzip's magic
// and read as it is otherwise (as gzread reads it, which this replaces so
// that data files, too, are opened by the Env: regular files only).
class IdxFile {
 public:
  static absl::StatusOr<std::unique_ptr<IdxFile>> Open(const std::string& path,
                                                       const Env* env) {
    absl::StatusOr<std::unique_ptr<SequentialFile>> f = env->NewSequentialFile(path);
    if (!f.ok()) {
      if (absl::IsNotFound(f.status())) {
        return absl::NotFoundError(absl::StrCat("cannot open ", path));
      }
      return f.status();
    }
    std::unique_ptr<IdxFile> idx(new IdxFile(path, *std::move(f)));
    if (absl::Status st = idx->Fill(); !st.ok()) return st;
    idx->gz_ = idx->in_.size() >= 2 && idx->in_[0] == 0x1f && idx->in_[1] == 0x8b;
    if (idx->gz_ && inflateInit2(&idx->zs_, 16 + MAX_WBITS) != Z_OK) {
      return absl::ResourceExhaustedError(absl::StrCat("zlib cannot start on ", path));
    }
    return idx;
  }

  ~IdxFile() {
    if (gz_) inflateEnd(&zs_);
  }

  // Exactly `len` bytes; DATA_LOSS on a short read or a zlib error.
  absl::Status ReadExact(void* buf, size_t len) {
    unsigned char* out = static_cast<unsigned char*>(buf);
    while (len > 0) {
      if (pos_ == in_.size()) {
        if (absl::Status st = Fill(); !st.ok()) return st;
        if (in_.empty()) {
          return absl::DataLossError(absl::StrCat("truncated file: ", path_));
        }
      }
      if (!gz_) {
        const size_t n = std::min(len, in_.size() - pos_);
        std::memcpy(out, in_.data() + pos_, n);
        pos_ += n;
        out += n;
        len -= n;
        continue;
      }
      zs_.next_in = in_.data() + pos_;
      zs_.avail_in = static_cast<uInt>(in_.size() - pos_);
      zs_.next_out = out;
      zs_.avail_out = static_cast<uInt>(std::min<size_t>(len, 1u << 30));
      const uInt asked = zs_.avail_out;
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      const size_t made = asked - zs_.avail_out;
      pos_ = in_.size() - zs_.avail_in;
      out += made;
      len -= made;
      if (rc == Z_STREAM_END) {
        // Another gzip member may follow (as gzread reads them on).
        if (inflateReset(&zs_) != Z_OK) {
          return absl::DataLossError(absl::StrCat("reading ", path_, ": zlib error"));
        }
      } else if (rc != Z_OK && !(rc == Z_BUF_ERROR && made == 0 && pos_ == in_.size())) {
        return absl::DataLossError(absl::StrCat(
            "reading ", path_, ": ", zs_.msg != nullptr ? zs_.msg : "zlib error"));
      }
    }
    return absl::OkStatus();
  }

 private:
  IdxFile(std::string path, std::unique_ptr<SequentialFile> file)
      : path_(std::move(path)), file_(std::move(file)) {}

  // The next piece of the file into in_ (empty at its end).
  absl::Status Fill() {
    in_.resize(kPiece);
    absl::StatusOr<size_t> n = file_->Read(reinterpret_cast<char*>(in_.data()), kPiece);
    if (!n.ok()) return absl::DataLossError(n.status().message());
    in_.resize(*n);
    pos_ = 0;
    return absl::OkStatus();
  }

  static constexpr size_t kPiece = 1 << 16;
  const std::string path_;
  const std::unique_ptr<SequentialFile> file_;
  std::vector<unsigned char> in_;
  size_t pos_ = 0;
  bool gz_ = false;
  z_stream zs_{};
};

absl::StatusOr<uint32_t> ReadBigEndian32(IdxFile* f) {
  unsigned char b[4];
  absl::Status s = f->ReadExact(b, 4);
  if (!s.ok()) return s;
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) |
         uint32_t{b[3]};
}

// Reads an IDX label file: magic, count, then `count` bytes.
absl::StatusOr<std::vector<uint8_t>> ReadLabels(const std::string& path, int64_t limit,
                                                int classes, int64_t* count_in_header,
                                                const Env* env) {
  absl::StatusOr<std::unique_ptr<IdxFile>> f = IdxFile::Open(path, env);
  if (!f.ok()) return f.status();
  absl::StatusOr<uint32_t> magic = ReadBigEndian32(f->get());
  if (!magic.ok()) return magic.status();
  if (*magic != kLabelsMagic) {
    return absl::DataLossError(absl::StrCat("bad magic number in label file ", path,
                                            ": 0x", absl::Hex(*magic), " (want 0x801)"));
  }
  absl::StatusOr<uint32_t> n = ReadBigEndian32(f->get());
  if (!n.ok()) return n.status();
  *count_in_header = *n;
  const int64_t keep =
      limit > 0 ? std::min<int64_t>(limit, *n) : static_cast<int64_t>(*n);
  // Read in chunks so a lying header fails on truncation, not on allocation.
  std::vector<uint8_t> labels;
  constexpr int64_t kChunk = 1 << 20;
  for (int64_t done = 0; done < keep;) {
    const int64_t m = std::min(kChunk, keep - done);
    labels.resize(static_cast<size_t>(done + m));
    absl::Status s = (*f)->ReadExact(labels.data() + done, static_cast<size_t>(m));
    if (!s.ok()) return s;
    done += m;
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= classes) {
      return absl::DataLossError(absl::StrCat("label ", int{labels[i]}, " at index ", i,
                                              " of ", path, " is not < ", classes));
    }
  }
  return labels;
}

}  // namespace

absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, bool train,
                                         int64_t limit, const Env* env,
                                         const std::atomic<bool>* cancelled) {
  const std::string prefix = train ? "train" : "t10k";
  absl::StatusOr<std::string> images_path =
      FindFile(dir, prefix + "-images-idx3-ubyte", env);
  if (!images_path.ok()) return images_path.status();
  absl::StatusOr<std::string> labels_path =
      FindFile(dir, prefix + "-labels-idx1-ubyte", env);
  if (!labels_path.ok()) return labels_path.status();

  Dataset ds;
  ds.classes = 10;
  int64_t label_count = 0;
  absl::StatusOr<std::vector<uint8_t>> labels =
      ReadLabels(*labels_path, limit, ds.classes, &label_count, env);
  if (!labels.ok()) return labels.status();

  const std::string& path = *images_path;
  absl::StatusOr<std::unique_ptr<IdxFile>> f = IdxFile::Open(path, env);
  if (!f.ok()) return f.status();
  uint32_t header[4];
  for (uint32_t& h : header) {
    absl::StatusOr<uint32_t> v = ReadBigEndian32(f->get());
    if (!v.ok()) return v.status();
    h = *v;
  }
  if (header[0] != kImagesMagic) {
    return absl::DataLossError(absl::StrCat("bad magic number in image file ", path,
                                            ": 0x", absl::Hex(header[0]),
                                            " (want 0x803)"));
  }
  const int64_t n = header[1];
  const uint32_t rows = header[2];
  const uint32_t cols = header[3];
  if (rows < 1 || cols < 1 || rows > kMaxDim || cols > kMaxDim) {
    return absl::DataLossError(
        absl::StrCat("implausible image size ", rows, "x", cols, " in ", path));
  }
  if (n != label_count) {
    return absl::DataLossError(absl::StrCat("count mismatch: ", path, " has ", n,
                                            " images but ", *labels_path, " has ",
                                            label_count, " labels"));
  }
  ds.features = static_cast<int>(rows * cols);
  ds.n = limit > 0 ? std::min(limit, n) : n;
  ds.labels = *std::move(labels);

  // Decode in chunks of whole images: bounded scratch, and truncation is
  // detected before the full float buffer is allocated.
  const size_t features = static_cast<size_t>(ds.features);
  const int64_t per_chunk =
      std::max<int64_t>(1, static_cast<int64_t>((1 << 22) / features));
  std::vector<uint8_t> raw;
  for (int64_t done = 0; done < ds.n;) {
    if (cancelled != nullptr && cancelled->load()) {
      return absl::CancelledError(
          absl::StrCat("reading ", path, " stopped: job cancelled"));
    }
    const int64_t m = std::min(per_chunk, ds.n - done);
    const size_t bytes = static_cast<size_t>(m) * features;
    raw.resize(bytes);
    absl::Status s = (*f)->ReadExact(raw.data(), bytes);
    if (!s.ok()) return s;
    const size_t old = ds.images.size();
    ds.images.resize(old + bytes);
    float* out = ds.images.data() + old;
    for (size_t i = 0; i < bytes; ++i) out[i] = raw[i] * (1.0f / 255.0f);
    done += m;
  }
  return ds;
}

namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform integer in [0, bound] by rejection, independent of the standard
// library's distributions (whose output is implementation-defined).
uint64_t UniformUpTo(std::mt19937_64& rng, uint64_t bound) {
  if (bound == ~uint64_t{0}) return rng();
  const uint64_t range = bound + 1;
  // Largest multiple of `range` that fits; values at or above it are biased.
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % range);
  uint64_t r;
  do {
    r = rng();
  } while (r >= limit);
  return r % range;
}

}  // namespace

ShardedSampler::ShardedSampler(int64_t n, int world, int rank, int batch, uint64_t seed,
                               int64_t global_batch)
    : n_(std::max<int64_t>(n, 0)),
      world_(world),
      rank_(rank),
      global_(global_batch > 0 ? global_batch : int64_t{world} * batch),
      begin_(0),
      end_(0),
      seed_(seed) {
  // Invalid shapes (checked by callers' flag validation) give zero steps
  // rather than undefined behaviour.
  if (world_ < 1 || batch < 1 || rank_ < 0 || rank_ >= world_ || global_ < world_) {
    global_ = 0;
    return;
  }
  begin_ = global_ * rank_ / world_;
  end_ = global_ * (rank_ + 1) / world_;
}

int64_t ShardedSampler::StepsPerEpoch() const { return global_ > 0 ? n_ / global_ : 0; }

void ShardedSampler::EnsureEpoch(int64_t epoch) {
  if (epoch == cached_epoch_) return;
  perm_.resize(static_cast<size_t>(n_));
  for (int64_t i = 0; i < n_; ++i) perm_[i] = i;
  // The stream for (seed, epoch) is derived by hashing both, so neighbouring
  // epochs and seeds give unrelated permutations.
  std::mt19937_64 rng(SplitMix64(seed_ ^ SplitMix64(static_cast<uint64_t>(epoch))));
  for (int64_t i = n_ - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(UniformUpTo(rng, static_cast<uint64_t>(i)));
    std::swap(perm_[i], perm_[j]);
  }
  cached_epoch_ = epoch;
}

void ShardedSampler::BatchIndices(int64_t epoch, int64_t step_in_epoch,
                                  std::vector<int64_t>* out) {
  const int64_t steps = StepsPerEpoch();
  if (step_in_epoch < 0 || step_in_epoch >= steps) {
    // Out-of-range step: no samples rather than reading past the epoch.
    out->clear();
    return;
  }
  EnsureEpoch(epoch);
  const int64_t first = step_in_epoch * global_;
  out->assign(perm_.begin() + first + begin_, perm_.begin() + first + end_);
}

}  // namespace gradsync
