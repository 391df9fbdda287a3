"""Wire messages as plain dicts: a job as the results file has it (the keys
of docs/user-guide.md "Results format", as client/report.cc JobToJson writes
them), job events and workers as `gradsync list --json` has them.
"""

import time

import grpc

from .spec import enum_name


def status_code_name(code):
    """The name of an absl::StatusCode number ("UNAVAILABLE"; "OK" for 0),
    as absl::StatusCodeToString writes it (the numbers are gRPC's)."""
    for c in grpc.StatusCode:
        if c.value[0] == code:
            return c.name
    return ""


def job_error_text(job):
    """"CODE: message" of a failed job, or its plain error (JobErrorText)."""
    if job.error_code == 0:
        return job.error
    return "%s: %s" % (status_code_name(job.error_code), job.error)


def epoch_to_dict(e):
    return {"epoch": e.epoch, "train_loss": e.train_loss,
            "test_accuracy": e.test_accuracy, "seconds": e.seconds}


def slowest_rank_to_dict(r):
    """The job's slowest rank by compute per step (JobResult.slowest_rank),
    or None for one rank or an older coordinator."""
    if not r.HasField("slowest_rank"):
        return None
    s = r.slowest_rank
    return {"rank": s.rank, "worker_id": s.worker_id,
            "seconds_per_step": s.seconds_per_step, "others_median": s.others_median,
            "ratio": s.ratio, "named": s.named}


def algorithm_source(pb, s):
    """Why an allreduce job's buckets ran their algorithms (common/spec/
    job_spec.h AlgorithmSource): "forced", "tuned", "table"; "" otherwise."""
    if s.kind == pb.JOB_KIND_BENCH or s.strategy != pb.STRATEGY_ALLREDUCE:
        return ""
    if s.algorithm not in (pb.ALGORITHM_AUTO, pb.ALGORITHM_UNSPECIFIED):
        return "forced"
    return "tuned" if s.tuning_table else "table"


def job_to_dict(pb, job):
    """One job as a results-file entry (client/report.cc JobToJson)."""
    s, r = job.spec, job.result
    ps = s.strategy == pb.STRATEGY_PS
    busy = r.comm_seconds + r.compute_seconds
    loop = r.exposed_comm_seconds + r.compute_seconds
    d = {
        "job_id": job.id,
        "name": s.name,
        "state": pb.JobState.Name(job.state),
        "error": job.error,
        "error_code": status_code_name(job.error_code),
    }
    if job.waiting_for:
        d["waiting_for"] = job.waiting_for
    d.update({
        "strategy": enum_name(pb, "strategy", s.strategy),
        "mode": enum_name(pb, "mode", s.mode),
        "staleness": s.staleness if s.HasField("staleness") else None,
        "weight_prediction": s.weight_prediction == pb.WEIGHT_PREDICTION_ON,
        "slow_ranks": ",".join("%d:%g" % (r.rank, r.factor) for r in s.slow_ranks),
        "workers": s.workers,
        "worker_ids": list(job.workers),
        "ps_shards": s.ps_shards if ps else 0,
        "ps_partition_bytes": (r.ps_partition_bytes or s.ps_partition_bytes) if ps else 0,
        "model": s.model,
        "num_params": r.num_params,
        "device": enum_name(pb, "device", s.device),
        "optimizer": enum_name(pb, "optimizer", s.optimizer),
        "lr": s.lr,
        "momentum": s.momentum,
        "seed": s.seed,
        "batch_size": s.batch_size,
        "global_batch": r.global_batch,
        "epochs": s.epochs,
        "steps": r.steps if r.steps > 0 else s.steps,
        "test_accuracy": r.test_accuracy,
        "final_train_loss": r.final_train_loss,
        "wall_seconds": r.wall_seconds,
        "samples_per_second": r.samples_per_second,
        "comm_seconds": r.comm_seconds,
        "exposed_comm_seconds": r.exposed_comm_seconds,
        "bucket_bytes": list(r.bucket_bytes),
        "bucket_algorithms": list(r.bucket_algorithms),
        "algorithm_source": algorithm_source(pb, s),
        "device_name": r.device,
        "compute_seconds": r.compute_seconds,
        "comm_seconds_per_worker": list(r.comm_seconds_per_worker),
        "compute_seconds_per_rank": list(r.compute_seconds_per_rank),
        "slowest_rank": slowest_rank_to_dict(r),
        "comm_share": r.comm_seconds / busy if busy > 0 else 0.0,
        "exposed_share": r.exposed_comm_seconds / loop if loop > 0 else 0.0,
        "init_checksum": r.init_checksum,
        "param_checksums": list(r.param_checksums),
        "per_epoch": [epoch_to_dict(e) for e in r.epochs],
        "submit_time_ms": job.submit_time_ms,
        "start_time_ms": job.start_time_ms,
        "end_time_ms": job.end_time_ms,
    })
    if s.elastic:
        d.update({
            "elastic": True,
            "min_workers": s.min_workers,
            "checkpoint_every": s.checkpoint_every,
            "generation": job.generation,
            "generations": [{
                "generation": g.generation, "worker_ids": list(g.workers),
                "start_step": g.start_step, "end_step": g.end_step,
                "ended_because": g.ended_because, "lost_worker": g.lost_worker,
                "lost_rank": g.lost_rank, "reform_seconds": g.reform_seconds,
                "steps_redone": g.steps_redone, "committed": g.committed,
            } for g in job.generations],
        })
    d["step"] = job.step
    # Not in the results file: what a live job's status shows.
    d["total_steps"] = job.total_steps
    d["stalls"] = list(job.stalls)
    return d


_KINDS = {1: "state", 2: "progress", 3: "epoch", 4: "stall", 5: "straggler"}


def event_to_dict(pb, ev):
    """One WatchJob event. Every event: kind ("state", "progress", "epoch",
    "stall", "straggler"), job_id, time (time.time() when it arrived). progress: step,
    total_steps, epoch, loss (rank 0's mean since its last report),
    samples_per_second, comm_share. epoch: epoch, train_loss, test_accuracy,
    seconds. state: state ("RUNNING", ...), message, job (job_to_dict).
    stall: message (the stall report); straggler: message (which rank,
    how far behind the others)."""
    d = {"kind": _KINDS.get(ev.kind, "unknown"), "job_id": ev.job_id, "time": time.time()}
    if ev.kind == pb.JobEvent.PROGRESS:
        d.update(step=ev.step, total_steps=ev.total_steps, epoch=ev.epoch, loss=ev.loss,
                 samples_per_second=ev.samples_per_second, comm_share=ev.comm_share)
    elif ev.kind == pb.JobEvent.EPOCH:
        d.update(epoch_to_dict(ev.epoch_result))
    elif ev.kind == pb.JobEvent.STATE:
        d.update(state=pb.JobState.Name(ev.state), message=ev.message,
                 job=job_to_dict(pb, ev.job))
    else:
        d["message"] = ev.message
    return d


def worker_to_dict(w):
    return {"id": w.id, "peer_address": w.peer_address, "state": w.state,
            "job_id": w.job_id, "num_gpus": w.num_gpus}
