#include "server/ps/ps_traffic.h"

namespace gradsync {

PsTraffic RegisterPsTraffic(MetricsRegistry* registry) {
  CounterFamily* requests = registry->AddCounterFamily(
      "gradsync_ps_requests_total",
      "Requests this parameter-server shard received, by method.", {"method"});
  CounterFamily* received = registry->AddCounterFamily(
      "gradsync_ps_received_bytes_total",
      "Request bytes (frame header and tensor data) this shard received, by "
      "method.",
      {"method"});
  CounterFamily* sent = registry->AddCounterFamily(
      "gradsync_ps_sent_bytes_total",
      "Parameter bytes (frame header and tensor data) this shard answered "
      "with, by method.",
      {"method"});
  auto method = [&](const char* name) {
    PsMethodTraffic t;
    t.requests = requests->WithLabels({name});
    t.received_bytes = received->WithLabels({name});
    t.sent_bytes = sent->WithLabels({name});
    return t;
  };
  CounterFamily* pushes = registry->AddCounterFamily(
      "gradsync_ps_pushes_total",
      "Gradient pushes this shard took (summed, or refused), by where: on "
      "the gRPC thread that read them (reaction; small pushes to a free "
      "slice, see the server's --ps_inline_bytes) or on its reduce threads "
      "(reduce_threads).",
      {"where"});
  PsTraffic traffic;
  traffic.init = method("init");
  traffic.pull = method("pull");
  traffic.push_pull = method("push_pull");
  traffic.push_pull.summed_inline = pushes->WithLabels({"reaction"});
  traffic.push_pull.summed_on_pool = pushes->WithLabels({"reduce_threads"});
  return traffic;
}

}  // namespace gradsync
