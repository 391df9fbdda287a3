#include "worker/metrics/worker_metrics.h"

#include "absl/status/status.h"

namespace gradsync {

WorkerMetrics::WorkerMetrics(MetricsRegistry* r)
    : steps(r->AddCounter("gradsync_worker_steps_total",
                          "Training steps completed by this worker (all jobs).")),
      samples_per_second(
          r->AddGauge("gradsync_worker_samples_per_second",
                      "Training samples per second of this worker over the last progress "
                      "report interval (0.5 s); 0 when idle.")),
      comm_seconds(r->AddCounter(
          "gradsync_worker_comm_seconds_total",
          "Seconds the communication threads were busy (waiting for gradient "
          "copies and synchronising), added when a training job ends.")),
      exposed_comm_seconds(
          r->AddCounter("gradsync_worker_exposed_comm_seconds_total",
                        "Seconds the training thread waited for communication (not "
                        "overlapped with compute), added when a training job ends.")),
      jobs(r->AddCounterFamily("gradsync_worker_jobs_total",
                               "Jobs this worker ran to the end, by outcome.",
                               {"outcome"})),
      peer_sent_bytes(r->AddCounterFamily(
          "gradsync_worker_peer_sent_bytes_total",
          "Tensor payload bytes sent to each peer rank (collectives).", {"peer"})),
      peer_received_bytes(r->AddCounterFamily(
          "gradsync_worker_peer_received_bytes_total",
          "Tensor payload bytes received from each peer rank (collectives).", {"peer"})),
      peer_streams(r->AddCounterFamily(
          "gradsync_worker_peer_streams_total",
          "Peer streams other ranks opened to this worker, by the server "
          "they reached: peer (--listen) or bulk (--bulk_port, collectives "
          "of at least the job's peer_bulk_bytes).",
          {"server"})),
      ps_sent_bytes(r->AddCounterFamily(
          "gradsync_worker_ps_sent_bytes_total",
          "Tensor payload bytes pushed to each parameter-server shard.", {"shard"})),
      ps_received_bytes(r->AddCounterFamily(
          "gradsync_worker_ps_received_bytes_total",
          "Tensor payload bytes pulled from each parameter-server shard.", {"shard"})),
      collective_seconds(r->AddHistogram(
          "gradsync_worker_collective_seconds",
          "Latency of one bucket's allreduce (ring strategies).", LatencyBuckets())),
      push_pull_seconds(r->AddHistogram(
          "gradsync_worker_ps_push_pull_seconds",
          "Latency of one bucket's push and pull (ps strategies).", LatencyBuckets())),
      heartbeats_missed(r->AddCounter(
          "gradsync_worker_heartbeats_missed_total",
          "Heartbeat intervals in which no heartbeat reached the coordinator "
          "stream (write failed or was late).")),
      stalls(
          r->AddCounter("gradsync_worker_stalls_total",
                        "Waits for a peer rank or PS shard that exceeded the job's stall "
                        "threshold (reported once per wait).")) {}

void WorkerMetrics::OnProgress(int64_t step, double samples_per_second_now) {
  // The first report of a job has step 0 (Progress counts steps completed).
  if (step < last_step_) last_step_ = 0;
  steps->Add(static_cast<double>(step - last_step_));
  last_step_ = step;
  samples_per_second->Set(samples_per_second_now);
}

void WorkerMetrics::OnJobDone(absl::StatusCode code, double comm, double exposed_comm) {
  comm_seconds->Add(comm);
  exposed_comm_seconds->Add(exposed_comm);
  jobs->WithLabels({code == absl::StatusCode::kOk          ? "succeeded"
                    : code == absl::StatusCode::kCancelled ? "cancelled"
                                                           : "failed"})
      ->Increment();
  samples_per_second->Set(0);
  last_step_ = 0;
}

}  // namespace gradsync
