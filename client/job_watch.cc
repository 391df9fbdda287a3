#include "client/job_watch.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_util.h"

namespace gradsync {

std::string RpcError(const grpc::Status& st) {
  return absl::StrCat(
      absl::StatusCodeToString(static_cast<absl::StatusCode>(st.error_code())), ": ",
      st.error_message(),
      st.error_code() == grpc::StatusCode::UNAUTHENTICATED
          ? " (give the cluster's token: --token_file=PATH "
            "or GRADSYNC_TOKEN)"
          : "");
}

absl::StatusOr<WatchEnd> WatchToEnd(v1::Coordinator::Stub* stub, const std::string& id,
                                    const WatchHooks& hooks) {
  grpc::ClientContext ctx;
  if (hooks.set_context) hooks.set_context(&ctx);
  v1::WatchJobRequest req;
  req.set_id(id);
  auto reader = stub->WatchJob(&ctx, req);
  v1::JobEvent ev;
  while (reader->Read(&ev)) {
    if (hooks.on_event) hooks.on_event(ev);
  }
  grpc::Status st = reader->Finish();
  if (hooks.set_context) hooks.set_context(nullptr);
  WatchEnd end;
  if (hooks.interrupted != nullptr && *hooks.interrupted) {
    grpc::ClientContext cctx;
    cctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(3)));
    v1::CancelJobRequest creq;
    creq.set_id(id);
    stub->CancelJob(&cctx, creq, &end.job);
    end.interrupted = true;
    return end;
  }
  if (!st.ok()) {
    return absl::UnavailableError(absl::StrCat("watch ", id, ": ", RpcError(st)));
  }
  grpc::ClientContext gctx;
  gctx.set_deadline(ToChrono(absl::Now() + absl::Seconds(5)));
  v1::GetJobRequest greq;
  greq.set_id(id);
  st = stub->GetJob(&gctx, greq, &end.job);
  if (!st.ok()) {
    return absl::UnavailableError(absl::StrCat("status ", id, ": ", RpcError(st)));
  }
  return end;
}

}  // namespace gradsync
