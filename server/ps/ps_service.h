// gRPC face of a PsStore: raw-ByteBuffer callback methods so that tensor data
// is reduced straight out of the received slices and replies are sent from a
// shared parameter snapshot without copies. A PushPull that must wait for the
// other ranks (sync) or for the slowest rank (SSP) holds its reactor, not a
// thread.
#ifndef GRADSYNC_SERVER_PS_PS_SERVICE_H_
#define GRADSYNC_SERVER_PS_PS_SERVICE_H_

#include "gradsync/v1/gradsync.grpc.pb.h"
#include "server/ps/ps_store.h"

namespace gradsync {

using PsServiceBase = v1::ParameterServer::WithRawCallbackMethod_Init<
    v1::ParameterServer::WithRawCallbackMethod_Pull<
        v1::ParameterServer::WithRawCallbackMethod_PushPull<
            v1::ParameterServer::WithCallbackMethod_EndJob<
                v1::ParameterServer::Service>>>>;

// Thread-safe. `store` must outlive the service.
class PsService final : public PsServiceBase {
 public:
  explicit PsService(PsStore* store) : store_(store) {}

  grpc::ServerUnaryReactor* Init(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* EndJob(grpc::CallbackServerContext* ctx,
                                   const v1::EndJobRequest* request,
                                   v1::EndJobResponse* response) override;

 private:
  PsStore* const store_;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_PS_PS_SERVICE_H_
