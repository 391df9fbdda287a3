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
          "of 128 KiB - 1 MiB (README \"BDP probing\"). Give every worker of "
          "a cluster the same value; `gradsync local` passes its own to the "
          "workers it starts.");

namespace gradsync {

void ApplyTransportFlags() { SetPeerBdpProbe(absl::GetFlag(FLAGS_peer_bdp_probe)); }

std::string PeerBdpProbeArg() {
  return absl::StrCat("--peer_bdp_probe=", PeerBdpProbe() ? "true" : "false");
}

}  // namespace gradsync
