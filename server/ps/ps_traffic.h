// What a PS shard's service counts for /metrics: requests and bytes per
// method, as the service sees them (whole frames: header plus float data).
// The service calls Received when a request arrives and Sent when it
// answers with parameters; default-constructed counters count nothing.
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
};

struct PsTraffic {
  PsMethodTraffic init, pull, push_pull;
};

// Registers gradsync_ps_requests_total, gradsync_ps_received_bytes_total and
// gradsync_ps_sent_bytes_total, each by method (init, pull, push_pull), on
// `registry` (which must outlive the result).
PsTraffic RegisterPsTraffic(MetricsRegistry* registry);

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_PS_PS_TRAFFIC_H_
