// gradsync dashboard: polls the coordinator's JSON (/api/overview and
// /api/jobs/ID, see server/coordinator/dashboard_server.h) once a second and
// draws it with uPlot (third_party/uplot). Every chart's element carries
// data-series (curves drawn) and data-points (points drawn) so that tests can
// read what was rendered; <body data-ready> is set after the first full render.
'use strict';

const POLL_MS = 1000;
const MAX_COMPARE = 6;
const COLORS = ['#1f6feb', '#cf222e', '#1a7f37', '#9a6700', '#8250df', '#0a7f8a'];

const state = {
  selected: null,      // job id shown under Job
  ticked: new Set(),   // job ids ticked for Compare
  details: new Map(),  // job id -> last /api/jobs/ID answer (shown jobs only)
  charts: new Map(),   // element id -> {plot, key}
  refreshes: 0,
};

// ----------------------------------------------------------------- helpers

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'style') e.style.cssText = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const num = (v) => (v === null || v === undefined || v === '' ? 0 : Number(v));
const fmt = (v, digits) => (Number.isFinite(v) ? v.toFixed(digits) : '–');
const enumName = (v, prefix) => String(v || '').replace(prefix, '').toLowerCase();
const ALGORITHMS = { halving_doubling: 'hd', recursive_doubling: 'rd', hierarchical: 'hier' };

function strategyLabel(spec) {
  const strategy = enumName(spec.strategy, 'STRATEGY_') || 'ps';
  const mode = enumName(spec.mode, 'SYNC_MODE_') || 'sync';
  return strategy + '-' + mode;
}

function algorithmLabel(spec) {
  if (enumName(spec.strategy, 'STRATEGY_') !== 'allreduce') return '';
  const a = enumName(spec.algorithm, 'ALGORITHM_');
  return ALGORITHMS[a] || a;
}

const ended = (job) => ['SUCCEEDED', 'FAILED', 'CANCELLED'].includes(job.state);
const started = (job) => num(job.start_time_ms) > 0;
const isBench = (job) => job.spec.kind === 'JOB_KIND_BENCH';

function commShare(comm, compute) {
  return comm + compute > 0 ? comm / (comm + compute) : NaN;
}

async function getJson(path) {
  const r = await fetch(path, { credentials: 'same-origin', cache: 'no-store' });
  if (r.status === 401) throw new Error('not signed in: open this page with ?token=TOKEN');
  if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
  return r.json();
}

// ----------------------------------------------------------------- charts

// Draws `series` ([{label, x: [...], y: [...]}]) into element `id`: one x
// axis shared by all (uPlot.join aligns them, gaps spanned).
function drawChart(id, title, xLabel, yLabel, series) {
  const host = document.getElementById(id);
  const drawn = series.filter((s) => s.x.length > 0);
  const points = drawn.reduce((n, s) => n + s.y.filter((v) => v !== null).length, 0);
  host.dataset.series = String(drawn.length);
  host.dataset.points = String(points);
  const key = title + '|' + drawn.map((s) => s.label).join('|');
  let entry = state.charts.get(id);
  if (drawn.length === 0) {
    if (entry) entry.plot.destroy();
    state.charts.delete(id);
    host.replaceChildren(el('div', { class: 'empty' }, title + ': no data yet'));
    return;
  }
  const data = drawn.length === 1
    ? [drawn[0].x, drawn[0].y]
    : uPlot.join(drawn.map((s) => [s.x, s.y]));
  if (entry && entry.key === key) {
    entry.plot.setData(data);
    return;
  }
  if (entry) entry.plot.destroy();
  host.replaceChildren();
  const opts = {
    title,
    width: Math.max(360, host.clientWidth || 420),
    height: 220,
    scales: { x: { time: false } },
    axes: [{ label: xLabel }, { label: yLabel }],
    series: [{ label: xLabel }].concat(drawn.map((s, i) => ({
      label: s.label,
      stroke: s.color || COLORS[i % COLORS.length],
      width: 1.5,
      spanGaps: true,
      points: { show: s.x.length < 3 },
    }))),
  };
  state.charts.set(id, { plot: new uPlot(opts, data, host), key });
}

// x and y columns of a job's curve, y = f(curve, i), null for gaps.
function curveSeries(detail, label, xOf, yOf, color) {
  const c = detail.curve;
  const start = num(detail.job.start_time_ms);
  const x = [];
  const y = [];
  for (let i = 0; i < c.step.length; i++) {
    x.push(xOf(c, i, start));
    const v = yOf(c, i);
    y.push(Number.isFinite(v) ? v : null);
  }
  return { label, x, y, color };
}

const byStep = (c, i) => c.step[i];
const bySeconds = (c, i, start) => (c.time_ms[i] - start) / 1000;
const lossOf = (c, i) => c.loss[i];
const spsOf = (c, i) => c.samples_per_second[i];

// Rank 0's step at unix ms `t`, interpolated on the progress curve (an
// epoch's own report carries the step of rank 0's last report, up to 0.5 s
// old).
function stepAt(c, t, start) {
  const n = c.step.length;
  if (n === 0) return 0;
  if (t <= c.time_ms[0]) {  // between the start (step 0) and the first report
    const f = (t - start) / Math.max(1, c.time_ms[0] - start);
    return Math.round(Math.max(0, Math.min(1, f)) * c.step[0]);
  }
  for (let i = 1; i < n; i++) {
    if (t <= c.time_ms[i]) {
      const f = (t - c.time_ms[i - 1]) / Math.max(1, c.time_ms[i] - c.time_ms[i - 1]);
      return Math.round(c.step[i - 1] + f * (c.step[i] - c.step[i - 1]));
    }
  }
  return c.step[n - 1];
}

// Test accuracy per epoch against step (placed by time on the curve) or
// against seconds since the start.
function accuracySeries(detail, label, color, againstTime) {
  const a = detail.accuracy;
  const start = num(detail.job.start_time_ms);
  return {
    label,
    x: a.time_ms.map((t, i) => (againstTime ? (t - start) / 1000
      : stepAt(detail.curve, t, start))),
    y: a.test_accuracy.map((v) => (v === null || v < 0 ? null : v)),
    color,
  };
}

// ----------------------------------------------------------------- tables

function progressCell(job, latest) {
  const total = num(job.total_steps);
  const step = num(job.step) || (latest ? latest.step : 0);
  const done = job.state === 'SUCCEEDED' ? 1 : total > 0 ? Math.min(1, step / total) : 0;
  return el('td', { 'data-step': step, 'data-total': total },
    el('span', { class: 'bar' }, el('span', { style: 'width:' + (100 * done).toFixed(1) + '%' })),
    total > 0 ? step + '/' + total : '');
}

function jobFigures(job, latest) {
  const r = job.result || {};
  if (ended(job) || !latest) {
    return {
      loss: num(r.final_train_loss) || (latest ? latest.loss : NaN),
      sps: num(r.samples_per_second) || (latest ? latest.samples_per_second : NaN),
      share: commShare(num(r.comm_seconds), num(r.compute_seconds)),
    };
  }
  return {
    loss: latest.loss,
    sps: latest.samples_per_second,
    share: commShare(latest.comm_ms_per_step, latest.compute_ms_per_step),
  };
}

function renderJobs(overview) {
  const body = document.querySelector('#jobs tbody');
  const rows = overview.jobs.slice().reverse().map(({ job, latest }) => {
    const f = jobFigures(job, latest);
    const note = job.waiting_for || job.error || (job.stalls || []).join('; ');
    const box = el('input', { type: 'checkbox', title: 'compare', onclick: (ev) => {
      ev.stopPropagation();
      if (ev.target.checked) state.ticked.add(job.id); else state.ticked.delete(job.id);
      refresh();
    } });
    box.checked = state.ticked.has(job.id);
    return el('tr', {
      'data-job-id': job.id, 'data-state': job.state,
      class: job.id === state.selected ? 'selected' : '',
      onclick: () => { state.selected = job.id; location.hash = 'job=' + job.id; refresh(); },
    },
    el('td', {}, box), el('td', {}, job.id), el('td', {}, job.spec.name || ''),
    el('td', { class: 'state state-' + job.state }, job.state.toLowerCase()),
    el('td', {}, isBench(job) ? 'bench' : strategyLabel(job.spec)),
    el('td', {}, algorithmLabel(job.spec)),
    el('td', { class: 'num' }, job.spec.workers),
    progressCell(job, latest),
    el('td', { class: 'num' }, fmt(f.loss, 4)),
    el('td', { class: 'num' }, fmt(f.sps, 0)),
    el('td', { class: 'num' }, Number.isFinite(f.share) ? fmt(100 * f.share, 0) + '%' : '–'),
    el('td', { class: 'note' }, note));
  });
  body.replaceChildren(...rows);
}

function hostOf(address) {
  const i = String(address || '').lastIndexOf(':');
  return i > 0 ? address.slice(0, i) : address || '';
}

function renderWorkers(overview) {
  const rows = overview.workers.map((w) => el('tr', { 'data-worker-id': w.id },
    el('td', {}, w.id), el('td', {}, hostOf(w.peer_address)),
    el('td', { class: 'state' }, w.state), el('td', {}, w.job_id),
    el('td', { class: 'num' }, w.num_gpus)));
  document.querySelector('#workers tbody').replaceChildren(...rows);
  const busy = overview.workers.filter((w) => w.state === 'busy').length;
  document.getElementById('cluster').textContent =
    overview.workers.length + ' workers (' + busy + ' busy), ' + overview.ps_shards +
    ' PS shard(s), ' + overview.jobs.filter((j) => j.job.state === 'QUEUED').length +
    ' queued';
}

function renderDetail(detail) {
  const section = document.getElementById('detail');
  if (!detail) {
    section.dataset.jobId = '';
    document.getElementById('detail-title').textContent = '(none)';
    return;
  }
  const job = detail.job;
  section.dataset.jobId = job.id;
  document.getElementById('detail-title').textContent =
    job.id + (job.spec.name ? ' (' + job.spec.name + ')' : '');
  const r = job.result || {};
  document.getElementById('detail-summary').textContent = [
    job.state.toLowerCase(), strategyLabel(job.spec), algorithmLabel(job.spec),
    job.spec.workers + ' workers', job.spec.model, 'batch ' + job.spec.batch_size,
    r.device || '', num(r.test_accuracy) > 0 ? 'test accuracy ' + fmt(num(r.test_accuracy), 4) : '',
    detail.curve_stride > 1 ? 'one point per ' + detail.curve_stride + ' reports' : '',
  ].filter((s) => s).join(' · ');
  drawChart('chart-loss-step', 'loss vs step', 'step', 'loss',
    [curveSeries(detail, 'loss', byStep, lossOf)]);
  drawChart('chart-loss-time', 'loss vs time', 'seconds since start', 'loss',
    [curveSeries(detail, 'loss', bySeconds, lossOf)]);
  drawChart('chart-acc-step', 'test accuracy vs step (per epoch)', 'step', 'accuracy',
    [accuracySeries(detail, 'test accuracy')]);
  drawChart('chart-acc-time', 'test accuracy vs time (per epoch)', 'seconds since start',
    'accuracy', [accuracySeries(detail, 'test accuracy', COLORS[2], true)]);
  drawChart('chart-sps-time', 'samples/s vs time', 'seconds since start', 'samples/s',
    [curveSeries(detail, 'samples/s', bySeconds, spsOf)]);
  drawChart('chart-comm-step', 'rank 0: communication vs compute per step', 'step', 'ms/step', [
    curveSeries(detail, 'comm busy ms', byStep, (c, i) => c.comm_ms_per_step[i], COLORS[1]),
    curveSeries(detail, 'compute ms', byStep, (c, i) => c.compute_ms_per_step[i], COLORS[0]),
  ]);
  renderRanks(detail);
}

// The job's slowest rank by compute per step (JobResult.slowest_rank: so far
// while it runs, the whole run's once it ended), as the rank table shows it.
function slowestText(slow, rank) {
  if (!slow || slow.rank !== rank) return '';
  return (slow.named ? 'straggler ' : 'slowest ') + fmt(slow.ratio, 1) + 'x';
}

function renderRanks(detail) {
  const maxStep = detail.ranks.reduce((m, r) => Math.max(m, r.step), 0);
  const now = Date.now();
  const slow = (detail.job.result || {}).slowest_rank;
  const rows = detail.ranks.map((r) => el('tr', slowestText(slow, r.rank)
    ? { 'data-rank': r.rank, 'data-slowest': fmt(slow.ratio, 2) } : { 'data-rank': r.rank },
    el('td', { class: 'num' }, r.rank), el('td', {}, r.worker_id), el('td', {}, hostOf(r.host)),
    el('td', { class: 'num' }, r.step), el('td', { class: 'num' }, maxStep - r.step),
    el('td', { class: 'num' }, fmt(r.samples_per_second, 0)),
    el('td', { class: 'num' }, fmt(100 * commShare(r.comm_seconds, r.compute_seconds), 0) + '%'),
    el('td', {}, slowestText(slow, r.rank)),
    el('td', { class: 'num' }, r.updated_ms > 0 ? fmt((now - r.updated_ms) / 1000, 1) + ' s ago' : '–'),
    el('td', { class: 'stall' }, r.stall)));
  document.querySelector('#ranks tbody').replaceChildren(...rows);
  const stalls = detail.job.stalls || [];
  document.getElementById('stalls').replaceChildren(...(stalls.length
    ? stalls.map((s) => el('li', {}, s))
    : [el('li', { class: 'muted' }, 'no rank reported a stall')]));
}

function compareRow(detail) {
  const job = detail.job;
  const r = job.result || {};
  const c = detail.curve;
  const last = c.step.length - 1;
  const comm = num(r.comm_seconds);
  const wall = num(r.wall_seconds);
  return el('tr', { 'data-job-id': job.id },
    el('td', {}, job.id), el('td', {}, strategyLabel(job.spec)),
    el('td', { class: 'num' }, job.spec.workers), el('td', {}, job.state.toLowerCase()),
    el('td', { class: 'num' }, num(r.steps) || num(job.step)),
    el('td', { class: 'num' }, num(r.test_accuracy) > 0 ? fmt(num(r.test_accuracy), 4) : '–'),
    el('td', { class: 'num' }, fmt(num(r.final_train_loss) || (last >= 0 ? c.loss[last] : NaN), 4)),
    el('td', { class: 'num' }, wall > 0 ? fmt(wall, 1) : '–'),
    el('td', { class: 'num' }, fmt(num(r.samples_per_second) ||
      (last >= 0 ? c.samples_per_second[last] : NaN), 0)),
    el('td', { class: 'num' }, comm > 0 ? fmt(comm, 2) : '–'),
    el('td', { class: 'num' }, wall > 0 ? fmt(100 * num(r.exposed_comm_seconds) / wall, 0) : '–'));
}

function renderCompare(details) {
  const section = document.getElementById('compare');
  section.dataset.jobs = details.map((d) => d.job.id).join(',');
  document.getElementById('compare-title').textContent =
    details.length ? details.map((d) => d.job.id).join(' vs ') : '(no jobs have run yet)';
  const label = (d) => d.job.id + ' ' + strategyLabel(d.job.spec);
  const each = (f) => details.map((d, i) => f(d, label(d), COLORS[i % COLORS.length]));
  drawChart('compare-loss-step', 'loss vs step', 'step', 'loss',
    each((d, l, c) => curveSeries(d, l, byStep, lossOf, c)));
  drawChart('compare-loss-time', 'loss vs time', 'seconds since start', 'loss',
    each((d, l, c) => curveSeries(d, l, bySeconds, lossOf, c)));
  drawChart('compare-acc-step', 'test accuracy vs step', 'step', 'accuracy',
    each((d, l, c) => accuracySeries(d, l, c)));
  drawChart('compare-sps-time', 'samples/s vs time', 'seconds since start', 'samples/s',
    each((d, l, c) => curveSeries(d, l, bySeconds, spsOf, c)));
  document.querySelector('#compare-table tbody').replaceChildren(...details.map(compareRow));
}

// ----------------------------------------------------------------- polling

// The jobs to compare: the ticked ones, else the newest that have run.
function compareIds(overview) {
  const jobs = overview.jobs.map((j) => j.job).filter((j) => !isBench(j));
  const ticked = jobs.filter((j) => state.ticked.has(j.id));
  const chosen = ticked.length ? ticked : jobs.filter(started).slice(-4);
  return chosen.slice(-MAX_COMPARE).map((j) => j.id);
}

// Fetches the details of `ids`; an ended job already fetched after its end
// is not fetched again. Forgets the details of jobs no longer shown.
async function fetchDetails(overview, ids) {
  const byId = new Map(overview.jobs.map((j) => [j.job.id, j.job]));
  await Promise.all(ids.map(async (id) => {
    const cached = state.details.get(id);
    const job = byId.get(id);
    if (cached && job && ended(cached.job) && ended(job)) return;
    try {
      state.details.set(id, await getJson('/api/jobs/' + encodeURIComponent(id)));
    } catch (e) {
      state.details.delete(id);
    }
  }));
  for (const id of Array.from(state.details.keys())) {
    if (!ids.includes(id)) state.details.delete(id);
  }
}

function defaultSelection(overview) {
  const jobs = overview.jobs.map((j) => j.job);
  const running = jobs.filter((j) => j.state === 'RUNNING');
  const pick = running.length ? running : jobs.filter(started);
  return pick.length ? pick[pick.length - 1].id : null;
}

let inFlight = false;
async function refresh() {
  if (inFlight) return;
  inFlight = true;
  const status = document.getElementById('status');
  try {
    const overview = await getJson('/api/overview');
    const known = new Set(overview.jobs.map((j) => j.job.id));
    for (const id of Array.from(state.ticked)) if (!known.has(id)) state.ticked.delete(id);
    if (!state.selected || !known.has(state.selected)) state.selected = defaultSelection(overview);
    const compare = compareIds(overview);
    const ids = Array.from(new Set(compare.concat(state.selected ? [state.selected] : [])));
    await fetchDetails(overview, ids);
    renderJobs(overview);
    renderWorkers(overview);
    renderDetail(state.selected ? state.details.get(state.selected) : null);
    renderCompare(compare.map((id) => state.details.get(id)).filter((d) => d));
    state.refreshes++;
    document.body.dataset.refreshes = String(state.refreshes);
    document.body.dataset.ready = '1';
    status.textContent = 'updated ' + new Date(overview.now_ms).toLocaleTimeString();
    status.className = 'muted';
  } catch (e) {
    status.textContent = String(e.message || e);
    status.className = 'stall';
  } finally {
    inFlight = false;
  }
}

const hash = /job=([^&]+)/.exec(location.hash);
if (hash) state.selected = decodeURIComponent(hash[1]);
refresh();
setInterval(refresh, POLL_MS);
