// The coordinator's worker registry: which workers have joined (id, peer
// address, GPUs, registration order), which job each is busy with, when each
// was last heard from, and which are dead. Idle workers are picked in
// registration order and then ranked host by host (OrderByHost), so a ring
// over them crosses each host's link once per direction, whatever order the
// workers of a many-worker host joined in.
//
// Plain state: no gRPC, no threads, no locking, no clock of its own (times
// are passed in). Not thread-safe; the Coordinator calls it under its mutex.
#ifndef GRADSYNC_SERVER_COORDINATOR_WORKER_REGISTRY_H_
#define GRADSYNC_SERVER_COORDINATOR_WORKER_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace gradsync {

struct RegisteredWorker {
  std::string id;
  std::string peer_address;       // where ring neighbours reach its Peer service
  std::string bulk_peer_address;  // its bulk Peer server; empty: none
  int num_gpus = 0;
  int64_t order = 0;     // registration order; a re-registration is new
  std::string job_id;    // empty when idle
  absl::Time last_seen;  // registration or latest message
  bool dead = false;     // lost; stays listed until the id registers again
};

// Puts workers that share a host (their peer addresses' HOST part, as
// AddressHost reads "HOST:PORT") next to each other: hosts in the order of
// their first worker in `workers`, each host's workers in their order there.
// A rank order of h1-0, h2-0, h1-1, h2-1 (workers that joined interleaved)
// becomes h1-0, h1-1, h2-0, h2-1: a ring over the first crosses the network
// at every hop and loads each host's link with two chunks per step, over the
// second at two hops of four, one chunk per link (16 MiB on 1 Gbit links:
// 426 against 213 ms). Workers on distinct hosts, or all on one, keep their
// order.
std::vector<const RegisteredWorker*> OrderByHost(
    std::vector<const RegisteredWorker*> workers);

class WorkerRegistry {
 public:
  // Adds a live, idle worker seen at `now`. A dead worker with the same id is
  // replaced (it gets a new registration order). ALREADY_EXISTS when a live
  // worker has the id.
  absl::Status Register(const std::string& id, const std::string& peer_address,
                        int num_gpus, absl::Time now,
                        const std::string& bulk_peer_address = "");

  // The worker with this id, dead or alive; nullptr when unknown.
  const RegisteredWorker* Find(const std::string& id) const;

  // True when `id` is registered and alive.
  bool IsLive(const std::string& id) const;

  // Records a message from a live worker at `now`; no-op otherwise.
  void Touch(const std::string& id, absl::Time now);

  // Marks a live worker dead and returns it; nullptr when the id is unknown
  // or already dead. Its job_id is kept (the job it was lost from).
  const RegisteredWorker* MarkDead(const std::string& id);

  // Live workers silent for longer than `timeout` at `now`, in id order.
  std::vector<std::string> Expired(absl::Time now, absl::Duration timeout) const;

  // The first `n` idle live workers in registration order, ranked by
  // OrderByHost, skipping those `skip` says (null: none); empty when fewer
  // than `n` are left.
  std::vector<const RegisteredWorker*> PickIdle(
      int n, const std::function<bool(const RegisteredWorker&)>& skip = nullptr) const;

  // Marks a worker busy with `job_id`.
  void Assign(const std::string& id, const std::string& job_id);

  // Makes a worker idle again if it is busy with `job_id` (a report about
  // another job changes nothing).
  void Release(const std::string& id, const std::string& job_id);

  // Live workers in registration order.
  std::vector<const RegisteredWorker*> Live() const;

  // Forgets dead workers last heard from more than `grace` before `now`
  // (they stop being listed; the id may register again as new). Returns how
  // many were forgotten. Keeps the registry bounded by the live workers plus
  // those that died within `grace`.
  size_t ForgetDead(absl::Time now, absl::Duration grace);

  // Every known worker, dead or alive.
  size_t size() const { return workers_.size(); }

 private:
  std::map<std::string, RegisteredWorker> workers_;
  int64_t next_order_ = 0;
};

}  // namespace gradsync

#endif  // GRADSYNC_SERVER_COORDINATOR_WORKER_REGISTRY_H_
