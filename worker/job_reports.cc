#include "worker/job_reports.h"

namespace gradsync {

v1::WorkerMessage::Progress ProgressProto(const ProgressReport& p) {
  v1::WorkerMessage::Progress m;
  m.set_job_id(p.job_id);
  m.set_rank(p.rank);
  m.set_step(p.step);
  m.set_total_steps(p.total_steps);
  m.set_job_step(p.job_step);
  m.set_epoch(p.epoch);
  m.set_loss(p.loss);
  m.set_samples_per_second(p.samples_per_second);
  m.set_comm_seconds(p.comm_seconds);
  m.set_compute_seconds(p.compute_seconds);
  m.set_init_checksum(p.init_checksum);
  return m;
}

v1::WorkerMessage::EpochDone EpochDoneProto(const EpochReport& e) {
  v1::WorkerMessage::EpochDone m;
  m.set_job_id(e.job_id);
  m.set_rank(e.rank);
  m.set_epoch(e.epoch);
  m.set_train_loss(e.train_loss);
  m.set_test_accuracy(e.test_accuracy);
  m.set_seconds(e.seconds);
  m.set_job_step(e.job_step);
  return m;
}

v1::WorkerMessage::JobDone JobDoneProto(const JobDoneReport& d) {
  v1::WorkerMessage::JobDone m;
  m.set_job_id(d.job_id);
  m.set_rank(d.rank);
  m.set_device(d.device);
  m.set_code(static_cast<int>(d.code));
  m.set_error(d.error);
  m.set_param_checksum(d.param_checksum);
  m.set_last_step_loss(d.last_step_loss);
  m.set_samples(d.samples);
  m.set_steps(d.steps);
  m.set_test_accuracy(d.test_accuracy);
  m.set_wall_seconds(d.wall_seconds);
  m.set_comm_seconds(d.comm_seconds);
  m.set_exposed_comm_seconds(d.exposed_comm_seconds);
  m.set_compute_seconds(d.compute_seconds);
  for (int64_t b : d.bucket_bytes) m.add_bucket_bytes(b);
  for (const std::string& a : d.bucket_algorithms) m.add_bucket_algorithms(a);
  if (d.trace.has_value()) {
    v1::WorkerTrace* t = m.mutable_trace();
    t->set_rank(d.trace->rank);
    t->set_dropped(d.trace->dropped);
    for (const TraceEvent& e : d.trace->events) {
      v1::TraceEvent* p = t->add_events();
      p->set_name(e.name);
      p->set_category(e.category);
      p->set_thread(e.thread);
      p->set_start_us(e.start_us);
      p->set_dur_us(e.dur_us);
      p->set_step(e.step);
      p->set_bucket(e.bucket);
      p->set_layer(e.layer);
    }
  }
  return m;
}

namespace {

void SetLink(const BenchLink& l, v1::BenchLink* m) {
  m->set_rank_a(l.rank_a);
  m->set_rank_b(l.rank_b);
  m->set_alpha_seconds(l.alpha_seconds);
  m->set_beta_bytes_per_second(l.beta_bytes_per_second);
}

}  // namespace

v1::BenchRankResult BenchRankResultProto(const BenchRankResult& r) {
  v1::BenchRankResult m;
  m.set_alpha_seconds(r.alpha_seconds);
  m.set_beta_bytes_per_second(r.beta_bytes_per_second);
  for (const BenchRankRow& row : r.rows) {
    v1::BenchRankRow* p = m.add_rows();
    p->set_bytes(row.bytes);
    p->set_algorithm(row.algorithm);
    for (double s : row.iteration_seconds) p->add_iteration_seconds(s);
    p->set_ok(row.ok);
    p->set_error(row.error);
  }
  if (r.between_hosts) SetLink(*r.between_hosts, m.mutable_between_hosts());
  if (r.inside_host) SetLink(*r.inside_host, m.mutable_inside_host());
  for (int g : r.host_groups) m.add_host_groups(g);
  return m;
}

}  // namespace gradsync
