#include "common/grpc/transport_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"

ABSL_FLAG(bool, peer_bdp_probe, true,
          "gRPC's bandwidth-delay probing on the streams between workers "
          "(ring, halving-doubling, tree, hierarchical; PS traffic always "
          "probes). true (gRPC's default): windows grow to what the link "
          "seems to hold. false: windows stay small and a sender waits for "
          "its receiver: faster for large tensors on loopback (64 MiB ring, "
          "4 ranks on 2 cores: 0.75x -> 0.9x of Gloo), slower for messages "
          "of 128 KiB - 1 MiB (docs/lab-notes/bdp-probing.md). Give every worker of "
          "a cluster the same value; `gradsync local` passes its own to the "
          "workers it starts.");

ABSL_FLAG(bool, ps_push_streams, true,
          "PS push/pull: send a worker's gradient partitions to each PS shard "
          "over one stream that stays open for the job (true), or as one "
          "unary call per partition (false, the older path). The stream "
          "saves each partition a call's headers, trailers and credential "
          "check (docs/lab-notes/ps-push-streams.md). Shards serve both; "
          "`gradsync local` passes its own value to the workers it starts.");

namespace gradsync {

void ApplyTransportFlags() {
  SetPeerBdpProbe(absl::GetFlag(FLAGS_peer_bdp_probe));
  SetPsPushStreams(absl::GetFlag(FLAGS_ps_push_streams));
}

std::string PeerBdpProbeArg() {
  return absl::StrCat("--peer_bdp_probe=", PeerBdpProbe() ? "true" : "false");
}

std::string PsPushStreamsArg() {
  return absl::StrCat("--ps_push_streams=", PsPushStreams() ? "true" : "false");
}

}  // namespace gradsync
