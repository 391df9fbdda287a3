#include "common/grpc/grpc_util.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/grpc/security.h"
#include "common/message_limits.h"

namespace gradsync {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

namespace {

std::atomic<bool> peer_bdp_probe{true};
std::atomic<bool> ps_push_streams{true};

// Calls set(name, value) for the Peer service's extra arguments: no BDP
// probing on bulk connections, nor anywhere with --peer_bdp_probe=false.
template <typename Set>
void AddPeerArgs(bool bulk, Set set) {
  if (bulk || !PeerBdpProbe()) set(GRPC_ARG_HTTP2_BDP_PROBE, 0);
}

}  // namespace

void SetPeerBdpProbe(bool on) { peer_bdp_probe.store(on); }

bool PeerBdpProbe() { return peer_bdp_probe.load(); }

void SetPsPushStreams(bool on) { ps_push_streams.store(on); }

bool PsPushStreams() { return ps_push_streams.load(); }

grpc::ChannelArguments DefaultChannelArgs(bool own_connection) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(kMaxMessageBytes));
  args.SetMaxSendMessageSize(static_cast<int>(kMaxMessageBytes));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect quickly after a daemon restarts (default backoff reaches 2 min),
  // but give each attempt kMinConnectTimeoutMs (gRPC takes the minimum
  // backoff as the connect timeout).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kMinConnectTimeoutMs);
  if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           bool own_connection) {
  return MakeSecureChannel(target, DefaultChannelArgs(own_connection),
                           GetClusterSecurity());
}

void ConfigureServerBuilder(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(static_cast<int>(kMaxMessageBytes));
  builder->SetMaxSendMessageSize(static_cast<int>(kMaxMessageBytes));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              1000);
  // gRPC sets SO_REUSEPORT by default: a second daemon given a port already
  // in use (or a worker's --bulk_port equal to its --listen port) then
  // listened beside the first and the kernel split the connections between
  // them. A port in use must fail to bind instead.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

grpc::ChannelArguments PeerChannelArgs(bool bulk) {
  grpc::ChannelArguments args = DefaultChannelArgs(/*own_connection=*/true);
  AddPeerArgs(bulk, [&](const char* name, int v) { args.SetInt(name, v); });
  return args;
}

std::shared_ptr<grpc::Channel> MakePeerChannel(const std::string& target, bool bulk) {
  return MakeSecureChannel(target, PeerChannelArgs(bulk), GetClusterSecurity(),
                           TokenOn::kCallerAdds);
}

std::shared_ptr<grpc::Channel> MakePsDataChannel(const std::string& target) {
  return MakeSecureChannel(target, DefaultChannelArgs(), GetClusterSecurity(),
                           TokenOn::kCallerAdds);
}

namespace {

absl::StatusOr<StartedServer> Start(const std::string& listen,
                                    const std::vector<grpc::Service*>& services,
                                    bool peer, bool bulk) {
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  if (peer) {
    AddPeerArgs(bulk,
                [&](const char* name, int v) { builder.AddChannelArgument(name, v); });
  }
  StartedServer out;
  builder.AddListeningPort(listen, ServerCredentialsFor(GetClusterSecurity()), &out.port);
  for (grpc::Service* s : services) builder.RegisterService(s);
  out.server = builder.BuildAndStart();
  if (out.server == nullptr || out.port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen, " (address in use or invalid)"));
  }
  return out;
}

}  // namespace

absl::StatusOr<StartedServer> StartServer(const std::string& listen,
                                          const std::vector<grpc::Service*>& services) {
  return Start(listen, services, /*peer=*/false, /*bulk=*/false);
}

absl::StatusOr<StartedServer> StartPeerServer(const std::string& listen,
                                              const std::vector<grpc::Service*>& services,
                                              bool bulk) {
  return Start(listen, services, /*peer=*/true, bulk);
}

std::string AddressHost(const std::string& address) {
  if (!address.empty() && address[0] == '[') {  // "[v6]" or "[v6]:port"
    const size_t close = address.find(']');
    return close == std::string::npos ? address : address.substr(0, close + 1);
  }
  // Two or more ':' without brackets: a bare IPv6 address, no port.
  if (std::count(address.begin(), address.end(), ':') > 1) return address;
  return address.substr(0, address.rfind(':'));
}

bool OnOneHost(const std::vector<std::string>& addresses) {
  for (const std::string& address : addresses) {
    if (AddressHost(address) != AddressHost(addresses[0])) return false;
  }
  return true;
}

std::string BulkAddress(const std::string& advertise, int bulk_port) {
  if (advertise.find(':') == std::string::npos || bulk_port <= 0) return "";
  return absl::StrCat(AddressHost(advertise), ":", bulk_port);
}

std::string LocalAddress(const std::string& listen, int port) {
  std::string host = AddressHost(listen);
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
  return absl::StrCat(host, ":", port);
}

void AwaitDoneOrCancel(absl::Mutex* mu, const bool* done, grpc::ClientContext* ctx,
                       absl::Time deadline, const Env* env) {
  {
    absl::MutexLock lock(mu);
    if (env->AwaitWithDeadline(mu, absl::Condition(done), deadline)) return;
  }
  ctx->TryCancel();
  absl::MutexLock lock(mu);
  mu->Await(absl::Condition(done));
}

absl::Status WaitForConnected(grpc::Channel* channel, const std::string& target,
                              absl::Time deadline,
                              const std::function<absl::Status()>& abandon,
                              const Env* env) {
  while (true) {
    grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) return absl::OkStatus();
    if (abandon) {
      if (absl::Status st = abandon(); !st.ok()) return st;
    }
    const absl::Time now = env->Now();
    const absl::Time until =
        abandon ? std::min(deadline, now + kConnectPollInterval) : deadline;
    if (now >= deadline ||
        (!channel->WaitForStateChange(state, ToChrono(until)) && until >= deadline)) {
      return absl::UnavailableError(absl::StrCat(
          "cannot connect to ", target, " (is the process running and the port right?)"));
    }
  }
}

}  // namespace gradsync
