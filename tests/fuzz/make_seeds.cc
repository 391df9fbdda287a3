// Writes the seed corpora of the fuzz targets:
//   <out>/fuzz_tensor_frame/seed-*  frames from EncodeFrame (first byte = cut)
//   <out>/fuzz_job_spec/seed-*      serialised JobSpecs and text names
//   <out>/fuzz_idx_loader/seed-*    2-byte image length + IDX images + labels
// Usage: fuzz_make_seeds tests/fuzz/corpus
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "common/grpc/tensor_frame.h"
#include "gradsync/v1/gradsync.pb.h"

namespace {

void Write(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

std::string Flatten(const grpc::ByteBuffer& buf) {
  std::vector<grpc::Slice> slices;
  if (!buf.Dump(&slices).ok()) std::exit(1);
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

void Be32(std::string* s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    s->push_back(static_cast<char>(v >> shift));
}

// 2-byte image length, images file, labels file.
std::string Idx(uint32_t n, uint32_t rows, uint32_t cols) {
  std::string images, labels;
  Be32(&images, 0x803);
  Be32(&images, n);
  Be32(&images, rows);
  Be32(&images, cols);
  for (uint32_t i = 0; i < n * rows * cols; ++i)
    images.push_back(static_cast<char>(i * 37));
  Be32(&labels, 0x801);
  Be32(&labels, n);
  for (uint32_t i = 0; i < n; ++i) labels.push_back(static_cast<char>(i % 10));
  std::string out;
  out.push_back(static_cast<char>(images.size() >> 8));
  out.push_back(static_cast<char>(images.size() & 0xff));
  return out + images + labels;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  for (const char* t : {"fuzz_tensor_frame", "fuzz_job_spec", "fuzz_idx_loader"}) {
    mkdir((root + "/" + t).c_str(), 0755);
  }

  // Tensor frames; the leading byte is the fuzzer's slice size (1 + b % 64).
  {
    const std::string dir = root + "/fuzz_tensor_frame/";
    std::vector<float> data = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 42.0f, -7.5f};
    gradsync::TensorHeader h;
    h.set_kind(gradsync::TensorHeader::GRAD);
    h.set_job_id("job-1");
    h.set_step(7);
    h.set_rank(1);
    h.set_bucket(2);
    Write(dir + "seed-grad-7floats",
          std::string(1, '\x06') +
              Flatten(gradsync::EncodeFrame(h, data.data(), data.size(), nullptr)));
    h.set_kind(gradsync::TensorHeader::CHUNK);
    h.set_phase(1);
    h.set_index(3);
    Write(dir + "seed-chunk-1float-cut1",
          std::string(1, '\x00') +
              Flatten(gradsync::EncodeFrame(h, data.data(), 1, nullptr)));
    h.set_kind(gradsync::TensorHeader::PULL);
    Write(dir + "seed-header-only",
          std::string(1, '\x3f') + Flatten(gradsync::EncodeHeaderOnly(h)));
    // Same frame with the fields reordered (the fallback path).
    gradsync::v1::TensorFrame frame;
    frame.mutable_header()->set_count(2);
    frame.set_data(std::string(reinterpret_cast<const char*>(data.data()), 8));
    std::string wire = frame.SerializeAsString();
    gradsync::v1::TensorFrame data_only;
    data_only.set_data(frame.data());
    gradsync::v1::TensorFrame header_only;
    *header_only.mutable_header() = frame.header();
    Write(dir + "seed-reordered", std::string(1, '\x02') + data_only.SerializeAsString() +
                                      header_only.SerializeAsString());
  }

  // Job specs: a full valid one, the minimal one, and text names.
  {
    const std::string dir = root + "/fuzz_job_spec/";
    gradsync::v1::JobSpec spec;
    spec.set_name("fuzz");
    spec.set_strategy(gradsync::v1::STRATEGY_PS);
    spec.set_mode(gradsync::v1::SYNC_MODE_ASYNC);
    spec.set_staleness(2);
    spec.set_workers(4);
    spec.set_ps_shards(2);
    spec.set_model("mlp:784-64-10");
    spec.set_dataset("fashion-mnist");
    spec.set_batch_size(32);
    spec.set_optimizer(gradsync::v1::OPTIMIZER_ADAM);
    spec.set_lr(0.01f);
    spec.set_epochs(2);
    spec.set_seed(123);
    spec.set_bucket_bytes(1 << 16);
    spec.set_chunk_bytes(1 << 12);
    spec.set_step_timeout_ms(5000);
    spec.set_train_limit(1000);
    Write(dir + "seed-ps-async", spec.SerializeAsString());
    gradsync::v1::JobSpec ring;
    ring.set_strategy(gradsync::v1::STRATEGY_ALLREDUCE);
    ring.set_workers(2);
    ring.set_batch_size(16);
    ring.set_steps(10);
    Write(dir + "seed-ring-minimal", ring.SerializeAsString());
    Write(dir + "seed-text-model", "mlp:784-256-128-10");
    Write(dir + "seed-text-name", "ring");
  }

  // IDX pairs.
  {
    const std::string dir = root + "/fuzz_idx_loader/";
    Write(dir + "seed-3x4x4", Idx(3, 4, 4));
    Write(dir + "seed-2x28x28", Idx(2, 28, 28));
    Write(dir + "seed-0-images", Idx(0, 28, 28));
  }
  return 0;
}
