// What a PS shard's service counts for /metrics: requests and bytes per
// method, as the service sees them (whole frames: header plus float data).
// The service calls Received when a request arrives and Sent when it
// answers with parameters, and where each push was summed (Summed); default-
// constructed counters count nothing.
#ifndef GRADSYNC_SERVER_PS_PS_TRAFFIC_H_
#define GRADSYNC_SERVER_PS_PS_TRAFFIC_H_

#include <cstddef>

#include "common/metrics/metrics.h"

namespace gradsync {

// Thread-safe (the counters are).
struct PsMethodTraffic {
  Counter* requests = nullptr;
  Counter* received_bytes = nullptr;
  Counter* sent_bytes = nullptr;

  void Received(size_t bytes) const {
    if (requests == nullptr) return;
    requests->Increment();
    received_bytes->Add(static_cast<double>(bytes));
  }
  void Sent(size_t bytes) const {
    if (sent_bytes != nullptr) sent_bytes->Add(static_cast<double>(bytes));
  }

  // Pushes taken on the reaction that read them (PsStore::TryPush) and
  // pushes handed to the reduce threads (push_pull only), refused ones
  // (unknown slice, wrong step) included.
  Counter* summed_inline = nullptr;
  Counter* summed_on_pool = nullptr;
  void Summed(bool on_reaction) const {
    Counter* c = on_reaction ? summed_inline : summed_on_pool;
    if (c != nullptr) c->Increment();
  }
};

struct PsTraffic {
  PsMethodTraffic init, pull, push_pull;
};

// Registers gradsync_ps_requests_total, gradsync_ps_received_bytes_total and
// gradsync_ps_sent_bytes_total, each by method (init, pull, push_pull), and
// gradsync_ps_pushes_total by where the push was summed (reaction: on the
// gRPC thread that read it; reduce_threads), on `registry` (which must
// outlive the result).
PsTraffic RegisterPsTraffic(MetricsRegistry* registry);

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_PS_PS_TRAFFIC_H_
