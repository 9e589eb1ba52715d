// drover dashboard (PRO-4). Plain JavaScript, no build step, no network
// beyond this server. Every string from the server is inserted as text,
// never as HTML, and inert (SEC-6): see inert and quote.
'use strict';

const $ = (id) => document.getElementById(id);

const LIVE = new Set(['pending', 'running']);
// The event types the timeline listens for: the per-run SSE stream names
// each event by its type, and EventSource only delivers the names it
// listens for. Those are the UES core types and drover's own live-control
// events; vendor extension events ("vendor:name") are fetched from
// /events when a gap in seq shows them.
const STREAMED = ['init', 'text', 'text_delta', 'thinking', 'tool_use', 'tool_result',
  'permission_request', 'error', 'done', 'drover:permission_answer', 'drover:steer', 'drover:interrupt'];

const state = {
  runs: new Map(), // id → run record, as /v1/runs/stream sends it
  rows: new Map(), // id → {tr, key}: the run's row and what it shows
  watch: null, // EventSource of run records
  selected: '',
  timeline: null, // the selected run's timeline, see openTimeline
  renderQueued: false,
  changes: new Map(), // run id → its change without the patch, from GET /v1/runs
  changesTimer: 0,
  picked: new Set(), // ids ticked in the list, for compare
  change: null, // the selected run's change as shown, see renderChange
  changeSeq: 0,
  commentSeq: 0,
  compare: null, // the ids compared, when the compare view is open
  compareSeq: 0,
  revisions: new Map(), // id of a run started by Request changes → the run it revises
  discardTimer: 0,
  cursor: '', // the run the keyboard is on (j/k), see moveCursor
  models: new Map(), // run id → the model its init event named
  inbox: { items: [], missing: false, loading: false, again: false, timer: 0 }, // see refreshInbox
  keyStatusTimer: 0,
};

// The live-control events drover records in a run's stream: shown as the
// run's own events. Every other namespaced type ("vendor:name") is internal
// and folded (see appendInternal).
const CONTROL_EVENTS = new Set(['drover:permission_answer', 'drover:steer', 'drover:interrupt']);

function isInternal(type) {
  return type.includes(':') && !CONTROL_EVENTS.has(type);
}

// ---- small helpers -------------------------------------------------------

// The escape sequences a terminal would act on (CSI, OSC, DCS, SOS, PM,
// APC, in their ESC and C1 forms, and the short ESC sequences), and the
// controls: C0 but newline and tab, DEL, C1, and the bidirectional controls
// that reorder what is shown.
const SEQUENCE = /(?:\x1b\[|\x9b)[\x20-\x3f]*[\x40-\x7e]?|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?|\x1b[\x20-\x2f]*[\x30-\x7e]?/g;
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

// inert is text from a model or a vendor as the page shows it (SEC-6): the
// sequences and controls above removed, as drover's terminal view does
// (internal/termtext Strip). Every text el makes passes here.
function inert(s) {
  return String(s).replace(SEQUENCE, '').replace(CONTROL, '');
}

// quote is a command a person is asked about, shown exactly: nothing
// removed, every control, format character (bidirectional controls,
// zero-width characters) and line or paragraph separator shown as an
// escape, as drover's terminal prompt does (internal/termtext Quote).
function quote(s) {
  return String(s).replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, (c) => {
    const cp = c.codePointAt(0);
    switch (cp) {
      case 0x1b: return '\\e';
      case 0x0a: return '\\n';
      case 0x09: return '\\t';
      case 0x0d: return '\\r';
    }
    if (cp < 0x20 || cp === 0x7f) return '\\x' + cp.toString(16).padStart(2, '0');
    if (cp > 0xffff) return '\\U' + cp.toString(16).padStart(8, '0');
    return '\\u' + cp.toString(16).padStart(4, '0');
  });
}

function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = inert(v);
    else if (k.startsWith('data-')) e.setAttribute(k, String(v));
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(inert(c)));
  }
  return e;
}

const pad2 = (n) => String(n).padStart(2, '0');

// fmtDuration shows a duration in full: "850ms", "12.3s", "1m 12s",
// "2h 03m", "3d 04h".
function fmtDuration(ms) {
  if (ms === undefined || ms === null || !(ms >= 0)) return '';
  if (ms < 1000) return Math.round(ms) + 'ms';
  const s = Math.floor(ms / 1000);
  if (s < 60) return (Math.floor(ms / 100) / 10).toFixed(1) + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + pad2(s % 60) + 's';
  if (s < 86400) return Math.floor(s / 3600) + 'h ' + pad2(Math.floor(s / 60) % 60) + 'm';
  return Math.floor(s / 86400) + 'd ' + pad2(Math.floor(s / 3600) % 24) + 'h';
}

// fmtSeconds is a countdown or an age, to the second: "42s", "1m 05s".
function fmtSeconds(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 60 ? s + 's' : fmtDuration(s * 1000);
}

// fmtCost shows a cost; "~" marks drover's estimate (usage.costEstimated).
function fmtCost(usd, estimated) {
  if (usd === undefined || usd === null) return '';
  return (estimated ? '~$' : '$') + (usd < 0.01 && usd > 0 ? usd.toFixed(4) : usd.toFixed(2));
}

// modelOf is a run's model, as far as the page knows it: the one its init
// event named (once its timeline was opened), else options.model; '' when
// the vendor picked it and the page has not seen which.
function modelOf(r) {
  return state.models.get(r.id) || (r.options && typeof r.options.model === 'string' ? r.options.model : '');
}

// unpriced reports usage with tokens and no price: no cost, or a vendor's
// cost of 0 for tokens, which the engine takes for a vendor that could not
// price its model (docs/limits.md).
function unpriced(u) {
  const tokens = (u.inputTokens || 0) + (u.outputTokens || 0);
  return tokens > 0 && (u.totalCostUsd === undefined || u.totalCostUsd === null || (u.totalCostUsd === 0 && !u.costEstimated));
}

// costView is what a run cost, as text and its longer title: the vendor's
// cost, drover's estimate ("~"), or "no price for MODEL" for tokens nobody
// could price — never blank or $0 then.
function costView(r) {
  const u = r.usage || {};
  if (unpriced(u)) {
    const m = modelOf(r);
    const title = 'no price for ' + (m || "the vendor's model") +
      ': drover prices tokens from its price table (docs/limits.md); add the model with Options.Prices or DROVER_PRICES';
    return { text: 'no price for ' + (m || 'its model'), short: 'no price', title, none: true };
  }
  const text = fmtCost(u.totalCostUsd, u.costEstimated);
  return { text, short: text, title: u.costEstimated ? "drover's estimate from the tokens and the model's list price" : '' };
}

// firstLine is a prompt's first line that says something.
function firstLine(s) {
  const lines = String(s || '').split('\n');
  const i = lines.findIndex((l) => l.trim() !== '');
  return i < 0 ? '' : lines[i] + (lines.slice(i + 1).some((l) => l.trim() !== '') ? ' …' : '');
}

function fmtInt(n) {
  return (n || 0).toLocaleString('en-US');
}

function fmtTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return d.toLocaleTimeString('en-GB', { hour12: false });
}

function isZeroTime(iso) {
  return !iso || iso.startsWith('0001-');
}

// runDuration is how long a run has taken: its recorded duration once
// ended, else the time since it started.
function runDuration(r) {
  if (r.durationMs) return r.durationMs;
  if (!isZeroTime(r.endedAt) && !isZeroTime(r.startedAt)) {
    return Date.parse(r.endedAt) - Date.parse(r.startedAt);
  }
  if (LIVE.has(r.status) && !isZeroTime(r.startedAt)) return Date.now() - Date.parse(r.startedAt);
  return undefined;
}

// statusLabel is the one word a run is shown by: its record's outcome
// (pending, running, completed, failed, cancelled, interrupted, timed_out,
// max_turns, max_budget); for a record without one, what its status and
// done status tell apart (a run cancelled ends "failed" with done status
// "interrupted").
function statusLabel(r) {
  if (r.status === 'running' && r.cancelRequested) return 'cancelling';
  if (r.outcome) return r.outcome;
  if (r.doneStatus === 'interrupted') return 'cancelled';
  if (r.status === 'completed' && r.doneStatus && r.doneStatus !== 'success') return r.doneStatus;
  return r.status;
}

// api calls the JSON API; a 401 shows the sign-in form.
async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: {} };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  if (resp.status === 401) {
    showLogin('');
    throw new Error('not signed in');
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!resp.ok) {
    const e = data && data.error;
    const err = new Error(e ? e.code + ': ' + e.message : resp.status + ' ' + resp.statusText);
    err.code = e ? e.code : '';
    err.status = resp.status;
    throw err;
  }
  return { data, headers: resp.headers };
}

// ---- sign-in -------------------------------------------------------------

function showLogin(msg) {
  stopWatch();
  closeTimeline();
  $('app').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = msg;
  setConn('signed-out', 'signed out');
}

async function login(token) {
  const resp = await fetch('/v1/login', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  return resp.ok;
}

// ---- the run list --------------------------------------------------------

function setConn(st, text) {
  const c = $('conn');
  c.dataset.state = st;
  c.textContent = text;
}

function stopWatch() {
  if (state.watch) state.watch.close();
  state.watch = null;
}

function startWatch() {
  stopWatch();
  const es = new EventSource('/v1/runs/stream?limit=200');
  state.watch = es;
  es.addEventListener('run', (e) => {
    const r = JSON.parse(e.data);
    const was = state.runs.get(r.id);
    state.runs.set(r.id, r);
    queueRender();
    if (was && was.status === r.status) return;
    // A new run or a status change: the runs' changes may have moved (a
    // run's change is recorded before its end), and a run that ended has
    // no request waiting any more.
    refreshChanges();
    if (was) queueInbox();
    if (was && LIVE.has(was.status) && !LIVE.has(r.status)) {
      if (r.id === state.selected) loadChange(r.id);
      if (state.compare && state.compare.includes(r.id)) loadCompare();
    }
  });
  es.addEventListener('synced', () => {
    setConn('live', 'live');
    refreshChanges();
  });
  es.onerror = async () => {
    if (es !== state.watch) return;
    setConn('reconnecting', 'reconnecting…');
    if (es.readyState === EventSource.CLOSED) {
      // The server refused the stream (a 401 or an error status), so the
      // browser will not retry by itself: find out why, then retry.
      try {
        await api('GET', '/v1/runs?limit=1');
        setTimeout(() => { if (es === state.watch) startWatch(); }, 2000);
      } catch { /* api showed the sign-in form, or the server is down */
        if (es === state.watch) setTimeout(() => { if (es === state.watch) startWatch(); }, 2000);
      }
    }
  };
}

function queueRender() {
  if (state.renderQueued) return;
  state.renderQueued = true;
  requestAnimationFrame(() => {
    state.renderQueued = false;
    renderRuns();
    renderUsage();
    renderDetailHead();
  });
}

// tree orders runs as a tree: roots newest first, each followed by its
// children oldest first, with their depth.
function tree() {
  const kids = new Map();
  const roots = [];
  for (const r of state.runs.values()) {
    if (r.parentId && state.runs.has(r.parentId)) {
      if (!kids.has(r.parentId)) kids.set(r.parentId, []);
      kids.get(r.parentId).push(r);
    } else {
      roots.push(r);
    }
  }
  const byCreated = (a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt);
  roots.sort((a, b) => byCreated(b, a));
  const out = [];
  const walk = (r, depth) => {
    out.push([r, depth]);
    for (const c of (kids.get(r.id) || []).sort(byCreated)) walk(c, depth + 1);
  };
  for (const r of roots) walk(r, 0);
  return out;
}

// filtering reports whether the list's filters hide any run.
function filtering() {
  return $('filter-status').value !== '' || $('filter-text').value.trim() !== '';
}

// shown applies the list's filters. A child is shown with a parent that
// matches, so the tree stays whole. A status matches a run's status or its
// outcome ("failed" lists the runs cancelled too; "cancelled" only them).
function shown(r, depth, parentShown) {
  if (depth > 0 && parentShown) return true;
  const st = $('filter-status').value;
  if (st === 'live' ? !LIVE.has(r.status) : st && r.status !== st && statusLabel(r) !== st) return false;
  const q = $('filter-text').value.trim().toLowerCase();
  if (!q) return true;
  return [r.agent, r.prompt, r.id, r.sessionId || ''].some((v) => v.toLowerCase().includes(q));
}

// renderRuns updates the run list in place: a row keeps its element for
// as long as its run is listed (so focus, hover and a click in progress
// survive updates), and only rows whose content changed are redrawn.
function renderRuns() {
  const body = $('runs-body');
  const want = [];
  const listed = []; // the runs shown, for the totals
  const shownAt = []; // whether the nearest row at each depth is shown
  for (const [r, depth] of tree()) {
    shownAt[depth] = shown(r, depth, depth > 0 && shownAt[depth - 1]);
    if (shownAt[depth]) {
      want.push(runRow(r, depth));
      listed.push(r);
    }
  }
  state.listed = listed;
  const keep = new Set(want);
  for (const tr of [...body.children]) {
    if (!keep.has(tr)) {
      tr.remove();
      state.rows.delete(tr.dataset.runId);
    }
  }
  want.forEach((tr, i) => {
    if (body.children[i] !== tr) body.insertBefore(tr, body.children[i] || null);
  });
  $('runs-empty').hidden = state.runs.size > 0;
  $('runs-none').hidden = state.runs.size === 0 || want.length > 0;
}

// runRow returns the run's row, updated if what it shows has changed. The
// row and its cells are made once and then updated in place: a click is a
// press and a release on the same element, so a cell replaced between the
// two (a status change arriving as a person clicks) would lose the click.
// workerOf names the drover worker that runs r (docs/scale-out.md): its
// owner is "worker:ID"; '' for a run of a drover serve or run.
function workerOf(r) {
  return (r.owner || '').startsWith('worker:') ? r.owner.slice('worker:'.length) : '';
}

function runRow(r, depth) {
  const u = r.usage || {};
  const label = statusLabel(r);
  const cost = costView(r);
  const cells = [label, r.agent + (workerOf(r) ? ' @ ' + workerOf(r) : ''), r.prompt, fmtTime(isZeroTime(r.startedAt) ? r.createdAt : r.startedAt),
    fmtDuration(runDuration(r)),
    u.inputTokens || u.outputTokens ? fmtInt(u.inputTokens) + ' / ' + fmtInt(u.outputTokens) : '',
    cost.short, cost.title];
  const ch = changeBadge(state.changes.get(r.id));
  const key = JSON.stringify([cells, depth, r.status, r.parentId || '', ch && ch.key]);
  let row = state.rows.get(r.id);
  if (!row) {
    const c = {
      pick: el('input', { type: 'checkbox', class: 'pick', 'aria-label': 'pick for compare', title: 'pick for compare',
        onclick: (e) => e.stopPropagation(), onkeydown: (e) => e.stopPropagation(),
        onchange: (e) => pick(r.id, e.target.checked) }),
      status: el('span'),
      agent: el('td', { class: 'agent' }),
      prompt: el('td', { class: 'prompt' }),
      started: el('td', { class: 'started' }),
      duration: el('td', { class: 'duration' }),
      tokens: el('td', { class: 'num' }),
      cost: el('td', { class: 'num' }),
    };
    const tr = el('tr', {
      class: 'run', 'data-run-id': r.id, tabindex: 0,
      onclick: () => selectRun(r.id),
      onkeydown: (e) => { if (e.key === 'Enter' && e.target === tr) selectRun(r.id); },
    }, el('td', {}, c.pick, c.status), c.agent, c.prompt, c.started, c.duration, c.tokens, c.cost);
    row = { tr, c, key: '', promptKey: '' };
    state.rows.set(r.id, row);
  }
  const tr = row.tr;
  tr.classList.toggle('selected', r.id === state.selected);
  tr.classList.toggle('cursor', r.id === state.cursor);
  row.c.pick.checked = state.picked.has(r.id);
  if (row.key === key) return tr;
  row.key = key;
  tr.dataset.status = r.status;
  tr.dataset.outcome = label;
  tr.dataset.depth = String(depth);
  if (r.parentId) tr.dataset.parentId = r.parentId;
  const c = row.c;
  c.status.className = 'status s-' + label;
  c.status.textContent = label;
  c.agent.textContent = inert(cells[1]);
  c.agent.title = inert(cells[1]) + (workerOf(r) ? ': run by worker ' + workerOf(r) : '');
  const promptKey = JSON.stringify([r.prompt, depth, ch && ch.key]);
  if (row.promptKey !== promptKey) {
    row.promptKey = promptKey;
    fillPrompt(c.prompt, r, depth, ch);
  }
  c.started.textContent = cells[3];
  c.started.title = new Date(isZeroTime(r.startedAt) ? r.createdAt : r.startedAt).toLocaleString('en-GB');
  if (LIVE.has(r.status)) c.duration.dataset.live = 'true';
  else delete c.duration.dataset.live;
  c.duration.textContent = cells[4];
  c.tokens.textContent = cells[5];
  c.cost.textContent = cells[6];
  c.cost.title = cells[7];
  c.cost.classList.toggle('unpriced', !!cost.none);
  return tr;
}

// fillPrompt shows a run's prompt in its cell — its first line; the whole
// prompt on hover and in the run's view — indented by its depth in the
// tree, with the summary of its change under it (changeBadge) if it has
// one.
function fillPrompt(td, r, depth, ch) {
  td.title = inert(r.prompt);
  td.replaceChildren(...(depth ? [el('span', { class: 'branch', text: '↳ ' })] : []),
    el('span', { class: 'first', text: firstLine(r.prompt) }), ch ? ch.el() : '');
  td.style.paddingLeft = (0.5 + depth * 1.25) + 'em'; // CSSOM: allowed by the CSP
}

// The header's counts: each outcome counted apart (a run cancelled,
// interrupted or timed out has not failed).
const COUNTED = {
  pending: 'live', running: 'live', cancelling: 'live', completed: 'completed', failed: 'failed', error: 'failed',
  cancelled: 'cancelled', interrupted: 'interrupted', timed_out: 'timedout', max_turns: 'limit', max_budget: 'limit',
};

// renderUsage totals the runs the list shows (its filters applied), and
// says "of N" when the filters hide some.
function renderUsage() {
  const runs = state.listed || [...state.runs.values()];
  const n = { live: 0, completed: 0, failed: 0, cancelled: 0, interrupted: 0, timedout: 0, limit: 0 };
  let tin = 0, tout = 0, tools = 0, cost = 0, estimated = false, noPrice = 0;
  for (const r of runs) {
    const k = COUNTED[statusLabel(r)];
    if (k) n[k]++;
    const u = r.usage || {};
    tin += u.inputTokens || 0;
    tout += u.outputTokens || 0;
    tools += u.toolUses || 0;
    cost += u.totalCostUsd || 0;
    if (u.costEstimated && u.totalCostUsd) estimated = true;
    if (unpriced(u)) noPrice++;
  }
  const filtered = filtering() && runs.length !== state.runs.size;
  $('usage-runs').textContent = fmtInt(runs.length) + (filtered ? ' of ' + fmtInt(state.runs.size) : '');
  $('usage').classList.toggle('filtered', filtered);
  $('usage').setAttribute('aria-label', filtered ? 'usage of the runs the filter shows' : 'usage of the runs listed');
  for (const [k, v] of Object.entries(n)) {
    const dd = $('usage-' + k);
    dd.textContent = fmtInt(v);
    if (dd.parentElement.hasAttribute('data-optional')) dd.parentElement.hidden = v === 0;
  }
  $('usage-in').textContent = fmtInt(tin);
  $('usage-out').textContent = fmtInt(tout);
  $('usage-tools').textContent = fmtInt(tools);
  $('usage-cost').textContent = fmtCost(cost, estimated);
  const np = $('usage-unpriced');
  np.hidden = noPrice === 0;
  np.textContent = noPrice ? '+ ' + plural(noPrice, 'run') + ' without a price' : '';
}

// tick refreshes the durations of live runs once a second.
function tick() {
  for (const td of document.querySelectorAll('#runs-body td.duration[data-live]')) {
    const r = state.runs.get(td.parentElement.dataset.runId);
    if (r) td.textContent = fmtDuration(runDuration(r));
  }
  const r = state.runs.get(state.selected);
  if (r && LIVE.has(r.status)) renderDetailHead();
  for (const span of document.querySelectorAll('#pending .due, #inbox .due')) tickDue(span);
  for (const span of document.querySelectorAll('#inbox .age')) tickAge(span);
}

// ---- the selected run ----------------------------------------------------

function selectRun(id) {
  if (!id) return;
  if (location.hash !== '#run=' + id) history.replaceState(null, '', '#run=' + id);
  closeCompare();
  setCursor(id);
  if (state.selected === id && state.timeline) return;
  state.selected = id;
  for (const tr of document.querySelectorAll('#runs-body tr.run')) {
    tr.classList.toggle('selected', tr.dataset.runId === id);
  }
  $('detail').hidden = false;
  layout();
  $('detail').dataset.runId = id;
  renderDetailHead();
  openTimeline(id);
  clearChange();
  loadChange(id);
  if (!state.runs.has(id)) {
    // Older than the runs listed (a link, #run=…): fetch its record.
    api('GET', '/v1/runs/' + encodeURIComponent(id))
      .then(({ data }) => {
        if (data && data.run && !state.runs.has(id)) {
          state.runs.set(id, data.run);
          queueRender();
        }
      })
      .catch((err) => { if (state.selected === id) $('detail-error').textContent = err.message; });
  }
}

function renderDetailHead() {
  const id = state.selected;
  if (!id) return;
  const r = state.runs.get(id);
  $('detail-id').textContent = id;
  const cancel = $('cancel');
  if (!r) {
    $('detail-agent').textContent = '';
    $('detail-status').textContent = '';
    cancel.hidden = true;
    $('steer').hidden = true;
    $('interrupt').hidden = true;
    return;
  }
  const label = statusLabel(r);
  $('detail-agent').textContent = r.agent;
  const st = $('detail-status');
  st.textContent = label;
  st.className = 'status s-' + label;
  st.dataset.status = r.status;
  $('detail-prompt').textContent = inert(r.prompt);
  const cost = costView(r);
  const summary = [el('span', { text: fmtDuration(runDuration(r)) }), el('span', { text: toolSummary(r) }),
    el('span', { class: cost.none ? 'unpriced' : undefined, title: cost.title || undefined, text: cost.text })];
  $('detail-summary').replaceChildren(...summary.filter((e) => e.textContent).flatMap((e, i) => [i ? ' · ' : '', e]));
  $('detail-error').textContent = inert(r.error || '');
  cancel.hidden = !LIVE.has(r.status);
  $('steer').hidden = r.status !== 'running';
  $('interrupt').hidden = r.status !== 'running';
  if (!cancel.dataset.pending) {
    cancel.disabled = !!r.cancelRequested;
    cancel.textContent = r.cancelRequested ? 'Cancelling…' : 'Cancel run';
  }

  const u = r.usage || {};
  const facts = [
    ['outcome', label],
    ['status', r.doneStatus ? r.status + ' (' + r.doneStatus + ')' : r.status],
    ['created', new Date(r.createdAt).toLocaleString('en-GB')],
    ['duration', fmtDuration(runDuration(r))],
    ['tokens in / out', fmtInt(u.inputTokens) + ' / ' + fmtInt(u.outputTokens)],
    ['cache read / write', u.cacheReadTokens !== undefined || u.cacheWriteTokens !== undefined
      ? fmtInt(u.cacheReadTokens) + ' / ' + fmtInt(u.cacheWriteTokens) : ''],
    ['reasoning tokens', u.reasoningTokens !== undefined ? fmtInt(u.reasoningTokens) : ''],
    ['tool calls', fmtInt(u.toolUses) + (r.denied ? ', ' + fmtInt(r.denied) + ' denied' : '')],
    ['permission requests', r.allowed || r.denied ? fmtInt(r.allowed) + ' allowed, ' + fmtInt(r.denied) + ' denied' : ''],
    ['turns', u.turns !== undefined ? fmtInt(u.turns) : ''],
    ['model', modelOf(r)],
    ['cost', cost.text],
    ['events', fmtInt(r.lastSeq)],
    ['session', r.sessionId || ''],
    ['resume token', r.resumeToken || ''],
    ['worker', workerOf(r)],
    ['process', r.pid ? 'pid ' + r.pid + (r.owner ? ' on ' + r.owner : '') : ''],
  ];
  $('detail-facts').replaceChildren(...facts.filter(([, v]) => v !== '').map(([k, v]) =>
    el('div', {}, el('dt', { text: k }), el('dd', { text: v }))));

  const links = [];
  if (r.parentId) links.push(el('span', {}, 'child of ', runLink(r.parentId)));
  const kids = [...state.runs.values()].filter((c) => c.parentId === id);
  if (kids.length) {
    links.push(el('span', {}, 'children: ', ...kids.flatMap((c, i) => [i ? ', ' : '', runLink(c.id)]),
      ...(kids.length > 1 ? [' (', compareLink(kids.map((c) => c.id), 'compare them'), ')'] : [])));
  }
  $('detail-links').replaceChildren(...links);
}

// toolSummary is "N tool calls, M denied": the run's tool calls
// (usage.toolUses) and how many of its permission requests were denied.
function toolSummary(r) {
  return plural((r.usage || {}).toolUses || 0, 'tool call') + ', ' + fmtInt(r.denied || 0) + ' denied';
}

// layout gives the run list the whole width while no run or comparison is
// open beside it.
function layout() {
  $('app').classList.toggle('solo', $('detail').hidden && $('compare').hidden);
}

function runLink(id) {
  return el('a', { href: '#run=' + id, text: id, onclick: (e) => { e.preventDefault(); selectRun(id); } });
}

function compareLink(ids, text) {
  return el('a', { href: '#compare=' + ids.join(','), text, onclick: (e) => { e.preventDefault(); openCompare(ids); } });
}

function closeTimeline() {
  const tl = state.timeline;
  if (tl) {
    tl.closed = true;
    if (tl.es) tl.es.close();
  }
  state.timeline = null;
}

// openTimeline follows a run's events: the SSE stream from seq 0 (the
// browser resumes with Last-Event-ID after a drop). Events are delivered
// one at a time, in seq order, through a promise chain so that a gap can
// be filled from /events before what follows it is shown.
function openTimeline(id) {
  closeTimeline();
  const list = $('timeline');
  list.replaceChildren();
  const tl = { id, list, lastSeq: 0, t0: 0, chain: Promise.resolve(), es: null, closed: false, tools: new Map(), delta: null,
    requests: new Map() }; // requestId → {req, answer}: the run's permission requests
  state.timeline = tl;
  renderPending();
  const es = new EventSource('/v1/runs/' + encodeURIComponent(id) + '/stream');
  tl.es = es;
  const onEvent = (e) => {
    let ev;
    try { ev = JSON.parse(e.data); } catch { return; }
    tl.chain = tl.chain.then(() => deliver(tl, ev)).catch((err) => showTimelineError(tl, err));
  };
  for (const t of STREAMED) es.addEventListener(t, onEvent);
  es.onerror = () => {
    // After done the server ends the stream; the browser would reconnect
    // and get nothing new, so stop. Otherwise let it resume by itself,
    // unless the server refused the stream: then say why.
    if (tl.done || tl.closed) {
      es.close();
    } else if (es.readyState === EventSource.CLOSED) {
      api('GET', '/v1/runs/' + encodeURIComponent(id))
        .then(() => showTimelineError(tl, new Error('the event stream was refused; reload to retry')))
        .catch((err) => showTimelineError(tl, err));
    }
  };
}

async function deliver(tl, ev) {
  if (tl.closed || ev.seq <= tl.lastSeq) return; // a duplicate after a reconnect
  if (ev.seq > tl.lastSeq + 1) await fill(tl, ev.seq - 1);
  if (tl.closed) return;
  render(tl, ev);
  tl.lastSeq = ev.seq;
  if (ev.type === 'done') {
    tl.done = true;
    tl.es.close();
  }
}

// fill fetches the events after tl.lastSeq up to seq `upto` (extension
// events, which the stream names by a type nobody listens for).
async function fill(tl, upto) {
  while (!tl.closed && tl.lastSeq < upto) {
    const n = Math.min(upto - tl.lastSeq, 1000);
    const { data } = await api('GET', '/v1/runs/' + encodeURIComponent(tl.id) + '/events?after=' + tl.lastSeq + '&limit=' + n);
    if (!data || data.length === 0) return;
    for (const ev of data) {
      if (tl.closed || ev.seq <= tl.lastSeq) continue;
      render(tl, ev);
      tl.lastSeq = ev.seq;
    }
  }
}

function showTimelineError(tl, err) {
  if (tl.closed) return;
  tl.list.append(el('li', { class: 'ev ev-error' }, el('span', { class: 'label', text: 'dashboard' }), String(err.message || err)));
}

function pre(text, cls) {
  const s = String(text ?? '');
  const p = el('pre', { class: cls || '', text: s });
  if (s.length > 2000 || s.split('\n').length > 30) {
    return el('details', {}, el('summary', { text: s.split('\n').length + ' lines, ' + fmtInt(s.length) + ' chars' }), p);
  }
  return p;
}

function render(tl, ev) {
  if (!tl.t0) tl.t0 = ev.timestamp;
  const p = ev.payload || {};
  const at = el('span', { class: 'at', text: '+' + fmtDuration(ev.timestamp - tl.t0) });
  const internal = isInternal(ev.type);
  const cls = 'ev ev-' + ev.type.replace(/[^a-z_]/gi, '-') + (internal ? ' ev-internal' : '');
  const item = (label, ...body) => el('li', { class: cls, 'data-seq': ev.seq, 'data-type': ev.type },
    at, el('span', { class: 'label', text: label }), el('div', { class: 'body' }, ...body));

  if (ev.type === 'text_delta') {
    // Deltas grow one block until the full text arrives and replaces it.
    if (!tl.delta) {
      tl.delta = item('writing…', '');
      tl.list.append(tl.delta);
    }
    tl.delta.querySelector('.body').append(inert(p.delta || ''));
    return;
  }
  if (tl.delta && (ev.type === 'text' || ev.type === 'done')) {
    tl.delta.remove();
    tl.delta = null;
  }
  let li;
  switch (ev.type) {
    case 'init':
      if (p.model && state.models.get(tl.id) !== p.model) {
        state.models.set(tl.id, p.model);
        queueRender();
      }
      li = item('started', (p.model ? 'model ' + p.model : '') + (p.cwd ? ' in ' + p.cwd : ''),
        p.tools && p.tools.length ? el('div', { class: 'muted', text: 'tools: ' + p.tools.join(', ') }) : null);
      break;
    case 'text':
      li = item('text', pre(p.content, 'text'));
      break;
    case 'thinking':
      li = item('thinking', pre(p.summary, 'muted'));
      break;
    case 'tool_use': {
      li = item('tool', el('strong', { text: p.toolName }), p.description ? ' ' + quote(p.description) : '',
        editView(p.toolName, p.kind, p.input || {}) || pre(JSON.stringify(p.input ?? {}, null, 2), 'input'));
      tl.tools.set(p.toolUseId, p.toolName);
      break;
    }
    case 'tool_result':
      li = item('result', el('span', { class: 'status s-' + p.status, text: p.status }),
        ' ' + (p.toolName || tl.tools.get(p.toolUseId) || ''),
        p.durationMs !== undefined ? el('span', { class: 'muted', text: ' ' + fmtDuration(p.durationMs) }) : null,
        pre(p.output, 'output'));
      break;
    case 'permission_request':
      li = item('asks', el('strong', { text: p.toolName }), ' ' + quote(p.description || p.reason || ''),
        p.answeredBy ? el('span', { class: 'muted', text: ' (answered as asked, by ' + answerSource({ by: p.answeredBy }).trim() + ')' }) : null,
        pre(JSON.stringify(p.input ?? {}, null, 2), 'input'));
      // A request answered as it was asked (answeredBy) waits for nobody.
      if (p.requestId && !p.answeredBy) tl.requests.set(p.requestId, { req: p, answer: null });
      renderPending();
      queueInbox();
      break;
    case 'drover:permission_answer': {
      const verb = p.behavior === 'allow' ? (p.always ? 'allowed for the run' : 'allowed') : 'denied';
      li = item('answer', el('span', { class: 'status s-' + (p.behavior === 'allow' ? 'success' : 'denied'), text: verb }),
        ' ' + (p.toolName || '') + ' by ' + answerSource(p), p.message ? pre(p.message, 'muted') : null);
      const r = tl.requests.get(p.requestId);
      if (r) r.answer = p;
      renderPending();
      queueInbox();
      break;
    }
    case 'drover:steer':
      li = item('message', pre(p.message, 'text'), p.by ? el('span', { class: 'muted', text: 'from ' + p.by }) : null);
      break;
    case 'drover:interrupt':
      li = item('interrupt', 'the turn was interrupted' + (p.by ? ' by ' + p.by : ''));
      break;
    case 'error':
      li = item('error', el('span', { class: 'code', text: p.code || '' }), ' ', p.message || '',
        p.recoverable ? el('span', { class: 'muted', text: ' (recoverable)' }) : null);
      break;
    case 'done': {
      const u = p.usage || {};
      li = item('done', el('span', { class: 'status s-' + p.status, text: p.status }),
        ' ' + fmtInt(u.inputTokens) + ' in / ' + fmtInt(u.outputTokens) + ' out' +
        (u.totalCostUsd !== undefined ? ' · ' + fmtCost(u.totalCostUsd, u.costEstimated) : ''),
        p.result ? pre(p.result, 'text') : null);
      break;
    }
    default: // an extension event: its payload as JSON, on one line when internal
      li = item(ev.type, pre(JSON.stringify(ev.payload ?? null, null, internal ? 0 : 2), 'muted'));
  }
  const shownAs = internal ? appendInternal(tl, li) : tl.list.appendChild(li);
  if (ev.type === 'error' || ev.type === 'done') {
    const r = state.runs.get(tl.id);
    if (r) renderDetailHead();
    if (ev.type === 'done') renderPending();
  }
  // Follow the end of the timeline unless the reader scrolled up; only the
  // timeline scrolls, never the page.
  const box = tl.list;
  if (box.scrollHeight - box.scrollTop - box.clientHeight < shownAs.offsetHeight + 80) box.scrollTop = box.scrollHeight;
}

// appendInternal adds an internal event (a vendor's or drover's own
// extension) to the group of internal events the timeline ends with, or to
// a new one: a dimmed line "3 internal events: …" that opens on a click.
// "show internal events" (#show-internal) opens them all. It returns the
// group.
function appendInternal(tl, li) {
  let g = tl.list.lastElementChild;
  if (!g || !g.classList.contains('ev-fold')) {
    const summary = el('button', { type: 'button', class: 'fold-summary', 'aria-expanded': 'false', title: 'show or hide them' });
    g = el('li', { class: 'ev-fold' }, el('span', { class: 'at', text: li.querySelector('.at').textContent }), summary,
      el('ol', { class: 'fold-items' }));
    summary.addEventListener('click', () => summary.setAttribute('aria-expanded', String(g.classList.toggle('open'))));
    tl.list.append(g);
  }
  const items = g.querySelector('.fold-items');
  items.append(li);
  const types = [...new Set([...items.children].map((x) => x.dataset.type))];
  g.querySelector('.fold-summary').textContent = inert(plural(items.children.length, 'internal event') + ': ' +
    types.slice(0, 3).join(', ') + (types.length > 3 ? ', …' : ''));
  return g;
}

// ---- edits and writes, as diffs ---------------------------------------------
//
// A tool call that edits, writes or patches a file is shown as the change
// it makes, coloured as the change view colours a diff (diffRow): an edit's
// old and new text, a write's content as lines added, a patch as it is.

// The vendors' tools of each kind (adapter/<vendor>/tools.go), for a
// tool_use without a kind.
const EDIT_TOOLS = {
  edit: ['Edit', 'MultiEdit', 'NotebookEdit', 'replace', 'edit', 'multiedit'],
  write: ['Write', 'write_file', 'write'],
  patch: ['apply_patch', 'patch'],
};
const EDIT_PAGE = 40; // lines of an edit shown before "show more"

function editKind(tool, kind, input) {
  if (['edit', 'write', 'patch'].includes(kind)) return kind;
  for (const [k, names] of Object.entries(EDIT_TOOLS)) if (names.includes(tool)) return k;
  if (typeof input.old_string === 'string' && typeof input.new_string === 'string') return 'edit';
  return '';
}

// editView is a tool call's edit, write or patch as a diff block; null for
// any other call, or one whose input says nothing of its change.
function editView(tool, kind, input) {
  const lines = editLines(editKind(tool, kind, input), input);
  return lines && lines.length ? diffBlock(lines) : null;
}

function editLines(kind, input) {
  const str = (...keys) => keys.map((k) => input[k]).find((v) => typeof v === 'string');
  const path = str('file_path', 'filePath', 'path', 'notebook_path', 'absolute_path') || '';
  const head = path ? [{ kind: 'file', text: path }] : [];
  switch (kind) {
    case 'edit': {
      const edits = Array.isArray(input.edits) ? input.edits : [input];
      const out = [...head];
      edits.forEach((e, i) => {
        if (!e || typeof e !== 'object') return;
        const o = e.old_string ?? e.oldString ?? e.old_source ?? '';
        const n = e.new_string ?? e.newString ?? e.new_source ?? '';
        if (typeof o !== 'string' || typeof n !== 'string') return;
        if (edits.length > 1) out.push({ kind: 'hunk', text: '@@ edit ' + (i + 1) + ' of ' + edits.length + ' @@' });
        out.push(...lineDiff(o, n));
      });
      return out.length > head.length ? out : null;
    }
    case 'write': {
      const content = str('content', 'text');
      if (content === undefined) return null;
      const src = content.split('\n');
      if (src.length > 1 && src[src.length - 1] === '') src.pop();
      return [...head, ...src.map((t, i) => ({ kind: 'add', text: '+' + t, n: i + 1 }))];
    }
    case 'patch': {
      const patch = str('patch', 'input', 'patchText', 'diff');
      if (patch) return patchLines(patch);
      if (!Array.isArray(input.changes)) return null;
      const out = [];
      for (const c of input.changes) {
        if (!c || typeof c.path !== 'string') continue;
        const k = typeof c.kind === 'string' ? c.kind : (c.kind && c.kind.type) || '';
        out.push({ kind: 'file', text: c.path + (k ? ' (' + k + ')' : '') });
        if (typeof c.diff === 'string' && c.diff) out.push(...patchLines(c.diff));
      }
      return out.length ? out : null;
    }
  }
  return null;
}

// lineDiff is old → new as lines removed and added, between the lines
// both begin and end with (three of each kept as context).
function lineDiff(o, n) {
  const a = o === '' ? [] : o.split('\n'), b = n === '' ? [] : n.split('\n');
  let top = 0;
  while (top < a.length && top < b.length && a[top] === b[top]) top++;
  let end = 0;
  while (end < a.length - top && end < b.length - top && a[a.length - 1 - end] === b[b.length - 1 - end]) end++;
  const ctx = (t) => ({ kind: 'ctx', text: ' ' + t });
  return [
    ...a.slice(Math.max(0, top - 3), top).map(ctx),
    ...a.slice(top, a.length - end).map((t) => ({ kind: 'del', text: '-' + t })),
    ...b.slice(top, b.length - end).map((t) => ({ kind: 'add', text: '+' + t })),
    ...a.slice(a.length - end, a.length - end + 3).map(ctx),
  ];
}

// patchLines is a patch's lines, coloured: a git diff as the change view
// parses it, else (Codex's "*** Begin Patch" form) by each line's first
// character.
function patchLines(patch) {
  if (/^diff --git /m.test(patch)) return parsePatch(patch);
  const src = patch.split('\n');
  if (src[src.length - 1] === '') src.pop();
  return src.map((l) => ({
    kind: l.startsWith('*** ') || l.startsWith('--- ') || l.startsWith('+++ ') ? 'file'
      : l.startsWith('@@') ? 'hunk' : l.startsWith('+') ? 'add' : l.startsWith('-') ? 'del' : 'ctx',
    text: l,
  }));
}

// diffBlock shows diff lines (diffRow), the first EDIT_PAGE of them and
// a button for the rest, in pages.
function diffBlock(lines) {
  const numbered = lines.some((l) => l.o !== undefined || l.n !== undefined);
  const box = el('div', { class: 'diff-block' + (numbered ? '' : ' plain'), role: 'region', 'aria-label': 'the change' });
  const rows = el('div', { class: 'rows' });
  const more = el('button', { type: 'button', class: 'secondary more' });
  let shownN = 0;
  const show = (n) => {
    const end = Math.min(lines.length, shownN + n);
    const frag = document.createDocumentFragment();
    for (let i = shownN; i < end; i++) frag.append(diffRow(lines[i], i));
    rows.append(frag);
    shownN = end;
    more.hidden = end >= lines.length;
    more.textContent = 'Show ' + plural(lines.length - end, 'more line');
  };
  more.addEventListener('click', () => show(DIFF_PAGE));
  box.append(rows, more);
  let first = 0; // the rows up to the EDIT_PAGE-th line of content, headers not counted
  for (let content = 0; first < lines.length && content < EDIT_PAGE; first++) {
    if (['add', 'del', 'ctx'].includes(lines[first].kind)) content++;
  }
  show(first);
  return box;
}

// answerSource says who answered a permission request.
function answerSource(a) {
  switch (a.by) {
    case 'rule': return 'rule ' + (a.detail || '');
    case 'client': return a.detail || 'a client';
    case 'deadline': return 'the deadline';
    case 'default': return 'drover (nobody could answer)';
    case 'run_end': return 'the end of the run';
  }
  return a.by || '?';
}

// ---- permission requests ---------------------------------------------------

// renderPending shows the selected run's requests that wait for an answer,
// each with what the call would do and the buttons to answer it.
function renderPending() {
  const tl = state.timeline;
  const open = tl && !tl.done ? [...tl.requests.values()].filter((r) => !r.answer) : [];
  $('pending').hidden = open.length === 0;
  const list = $('pending-list');
  const keep = new Set(open.map((r) => r.req.requestId));
  for (const li of [...list.children]) if (!keep.has(li.dataset.requestId)) li.remove();
  for (const r of open) {
    if (list.querySelector('li[data-request-id="' + CSS.escape(r.req.requestId) + '"]')) continue;
    list.append(requestItem(tl.id, r.req));
  }
}

// requestItem is one request: the tool, what it would do, and Allow /
// Always / Deny (with a message the model sees).
function requestItem(runId, req) {
  const msg = el('input', { placeholder: 'message to the model (optional)', 'aria-label': 'message to the model' });
  const err = el('p', { class: 'error', role: 'alert' });
  const answer = async (behavior, always, button) => {
    for (const b of li.querySelectorAll('button')) b.disabled = true;
    err.textContent = '';
    try {
      await respond(runId, req.requestId, behavior, msg.value.trim(), always);
      button.textContent += ' ✓';
    } catch (e) {
      err.textContent = e.code === 'CONFLICT' ? 'already answered' : e.message;
      for (const b of li.querySelectorAll('button')) b.disabled = false;
    }
  };
  const due = el('span', { class: 'due', 'data-deadline': req.deadline || '' });
  const allow = el('button', { type: 'button', class: 'allow', text: 'Allow', onclick: () => answer('allow', false, allow) });
  const always = el('button', { type: 'button', class: 'always', text: 'Always', title: 'allow this call for the rest of the run',
    onclick: () => answer('allow', true, always) });
  const deny = el('button', { type: 'button', class: 'deny', text: 'Deny', onclick: () => answer('deny', false, deny) });
  const li = el('li', { class: 'request', 'data-request-id': req.requestId },
    el('div', {}, el('span', { class: 'what', text: req.toolName + ': ' + quote(req.description || '') }), due),
    callView(req.toolName, req.input || {}, req.kind),
    el('div', { class: 'actions' }, allow, always, deny, msg), err);
  tickDue(due);
  return li;
}

// callView shows what a call would do: the command of a shell call
// (exactly, see quote), a diff of an edit, the content of a write, else
// the input as JSON.
function callView(tool, input, kind) {
  const str = (...keys) => keys.map((k) => input[k]).find((v) => typeof v === 'string' && v !== '');
  const cmd = str('command', 'cmd');
  if (cmd) return el('pre', { class: 'command', text: '$ ' + quote(cmd) });
  const edit = editView(tool, kind, input);
  if (edit) return edit;
  const lines = (prefix, text, cls) => String(text).split('\n').map((l) => el('span', { class: cls, text: prefix + l + '\n' }));
  const path = str('file_path', 'path', 'filePath');
  if (typeof input.content === 'string') {
    return el('pre', { class: 'diff' }, (path || '') + '\n', ...lines('+ ', input.content, 'add'));
  }
  const patch = str('patch', 'input');
  if (patch) {
    return el('pre', { class: 'diff' }, ...patch.split('\n').map((l) => el('span',
      { class: l.startsWith('+') ? 'add' : l.startsWith('-') ? 'del' : '', text: l + '\n' })));
  }
  return el('pre', { text: JSON.stringify(input, null, 2) });
}

// tickDue shows how long a request has before it is denied.
function tickDue(span) {
  const d = Number(span.dataset.deadline);
  if (!d) {
    if (span.dataset.deadline === '0') span.textContent = 'no deadline';
    return;
  }
  const left = d - Date.now();
  span.classList.toggle('soon', left < 60000);
  span.textContent = 'denied in ' + fmtSeconds(left) + ' without an answer';
}

// tickAge shows how long ago a request was asked.
function tickAge(span) {
  const at = Date.parse(span.dataset.asked || '');
  span.textContent = Number.isNaN(at) ? '' : 'asked ' + fmtSeconds(Date.now() - at) + ' ago';
}

// ---- the inbox: every request waiting for an answer ------------------------
//
// GET /v1/requests lists the permission requests of every run that wait for
// an answer, oldest first. It is read when the page opens, every few
// seconds, and soon after a run's stream shows a request or an answer. A
// server without it (404) leaves the panel hidden, and is not asked again.

const INBOX_POLL = 3000;

// queueInbox reads the inbox soon: events come in bursts.
function queueInbox() {
  const ib = state.inbox;
  if (ib.missing || ib.timer) return;
  ib.timer = setTimeout(() => {
    ib.timer = 0;
    refreshInbox();
  }, 150);
}

async function refreshInbox() {
  const ib = state.inbox;
  if (ib.missing || $('app').hidden) return;
  if (ib.loading) {
    ib.again = true;
    return;
  }
  ib.loading = true;
  try {
    const { data } = await api('GET', '/v1/requests');
    ib.items = (data && Array.isArray(data.requests)) ? data.requests.filter((x) => x && x.runId && x.request && x.request.requestId) : [];
    renderInbox();
  } catch (err) {
    if (err.status === 404) {
      ib.missing = true;
      ib.items = [];
      renderInbox();
    } // else: keep what is shown until the next read
  } finally {
    ib.loading = false;
    if (ib.again) {
      ib.again = false;
      queueInbox();
    }
  }
}

// renderInbox shows the requests waiting, keeping the items already shown
// (and what was typed in them), with their count in the page's title and
// the header's badge.
function renderInbox() {
  const items = state.inbox.items;
  const n = items.length;
  $('inbox').hidden = n === 0;
  $('inbox-count').textContent = n ? String(n) : '';
  const badge = $('inbox-badge');
  badge.hidden = n === 0;
  badge.textContent = n === 1 ? '1 request waiting' : n + ' requests waiting';
  document.title = (n ? '(' + n + ') ' : '') + 'drover';
  const list = $('inbox-list');
  const key = (x) => x.runId + '\u0000' + x.request.requestId;
  const have = new Map([...list.children].map((li) => [li.dataset.key, li]));
  const want = items.map((x) => have.get(key(x)) || inboxItem(x, key(x)));
  for (const li of have.values()) if (!want.includes(li)) li.remove();
  want.forEach((li, i) => {
    if (list.children[i] !== li) list.insertBefore(li, list.children[i] || null);
  });
}

// inboxItem is one request waiting: the agent, the run (a link), the tool
// and what the call would do, how long ago it was asked and how long it has
// left, and Allow / Deny (with a message the model sees).
function inboxItem(x, key) {
  const req = x.request;
  const msg = el('input', { placeholder: 'message to the model (optional)', 'aria-label': 'message to the model' });
  const err = el('p', { class: 'error', role: 'alert' });
  const answer = async (behavior, button) => {
    for (const b of li.querySelectorAll('button')) b.disabled = true;
    err.textContent = '';
    try {
      await respond(x.runId, req.requestId, behavior, msg.value.trim());
      button.textContent += ' ✓';
      li.classList.add('answered');
    } catch (e) {
      err.textContent = e.code === 'CONFLICT' ? 'already answered' : e.message;
      for (const b of li.querySelectorAll('button')) b.disabled = false;
    }
    queueInbox();
  };
  const age = el('span', { class: 'age', 'data-asked': x.askedAt || '' });
  const due = el('span', { class: 'due', 'data-deadline': String(req.deadline || 0) });
  const allow = el('button', { type: 'button', class: 'allow', text: 'Allow', onclick: () => answer('allow', allow) });
  const deny = el('button', { type: 'button', class: 'deny', text: 'Deny', onclick: () => answer('deny', deny) });
  const li = el('li', { class: 'inbox-item', 'data-key': key, 'data-run-id': x.runId, 'data-request-id': req.requestId },
    el('div', { class: 'head' },
      el('span', { class: 'agent', text: x.agent || '' }), ' ', runLink(x.runId), ' ',
      el('strong', { class: 'tool', text: req.toolName || '' }), ' ',
      el('span', { class: 'what', text: quote(req.description || req.reason || '') })),
    el('div', { class: 'meta' }, age, due,
      x.prompt ? el('span', { class: 'prompt', title: inert(x.prompt), text: firstLine(x.prompt) }) : null),
    el('details', {}, el('summary', { text: 'what it would do' }), callView(req.toolName, req.input || {}, req.kind)),
    el('div', { class: 'actions' }, allow, deny, msg), err);
  tickAge(age);
  tickDue(due);
  return li;
}

// respond answers a run's permission request, as the dashboard.
function respond(runId, requestId, behavior, message, always) {
  return api('POST', '/v1/runs/' + encodeURIComponent(runId) + '/respond',
    { requestId, behavior, always: !!always, message: message || '', by: 'dashboard' });
}

// ---- a run's change (WS-2, WS-3) -----------------------------------------
//
// A run that worked in a git repository has a change (GET /v1/runs/{id}/change):
// its files, its patch, the check's result, its review state and the
// decisions taken. The patch is the agent's work that a person is about to
// take into their tree: it is shown exactly (exact), never as markup, and
// in pages so that a patch of megabytes does not hold the page up.

// What a change's state is called, in full and in the run list.
const CHANGE_STATE = {
  open: ['working', 'working'],
  none: ['no change', 'no change'],
  pending: ['pending review', 'review'],
  applied: ['applied', 'applied'],
  merged: ['merged', 'merged'],
  discarded: ['discarded', 'discarded'],
  revised: ['revised', 'revised'],
};
const DIFF_PAGE = 1500; // diff lines shown at first, and at each "show more"
const DIFF_LINE = 2000; // characters shown of one diff line

function changeLabel(st, short) {
  const l = CHANGE_STATE[st];
  return l ? l[short ? 1 : 0] : String(st || '');
}

// changeState is what a change's state is called: a run in place has
// nothing to review (its change is in the working tree already).
function changeState(c, short) {
  if (c.state === 'pending' && !c.branch) return short ? 'in place' : 'changed in place';
  return changeLabel(c.state, short);
}

// exact is text of a change as a person reviews it: shown exactly, every
// control and format character as an escape (see quote), tabs kept.
function exact(s) {
  return String(s).split('\t').map(quote).join('\t');
}

function plural(n, one, many) {
  return fmtInt(n) + ' ' + (n === 1 ? one : many || one + 's');
}

function fmtWhen(iso) {
  return isZeroTime(iso) ? '' : new Date(iso).toLocaleString('en-GB');
}

// lineCounts totals a change's files and lines.
function lineCounts(c) {
  let added = 0, removed = 0;
  for (const f of c.files || []) {
    added += f.added || 0;
    removed += f.removed || 0;
  }
  return { files: (c.files || []).length, added, removed };
}

// addDel shows lines added and removed, coloured.
function addDel(added, removed) {
  return el('span', { class: 'addel' }, el('span', { class: 'add', text: '+' + fmtInt(added) }), ' ',
    el('span', { class: 'del', text: '−' + fmtInt(removed) }));
}

// changeBadge is a run's change as the run list shows it, under the
// prompt: its state, files and lines; null for a run without one.
function changeBadge(c) {
  if (!c) return null;
  const n = lineCounts(c);
  const st = changeState(c, true);
  const files = n.files ? plural(n.files, 'file') : '';
  const key = JSON.stringify([st, c.state, files, n.added, n.removed]);
  return {
    key,
    el: () => el('div', { class: 'chg-line', title: 'change: ' + changeState(c) }, el('span', { class: 'chg cs-' + c.state, 'data-state': c.state, text: st }),
      ...(files ? [' ' + files + ' ', addDel(n.added, n.removed)] : [])),
  };
}

// refreshChanges fetches the changes of the runs listed (GET /v1/runs
// carries them; the stream of run records does not), at most a few times
// a second.
function refreshChanges() {
  if (state.changesTimer) return;
  state.changesTimer = setTimeout(async () => {
    state.changesTimer = 0;
    try {
      const { data } = await api('GET', '/v1/runs?limit=200');
      for (const c of (data && data.changes) || []) {
        if (!(state.change && state.change.id === c.runId)) state.changes.set(c.runId, c);
      }
      queueRender();
    } catch { /* the list goes on without them (api showed the sign-in form if need be) */ }
  }, 300);
}

// clearChange empties the change view, for another run.
function clearChange() {
  state.change = null;
  state.changeSeq++;
  $('change').hidden = true;
  $('diff').replaceChildren();
  $('diff-more').hidden = true;
  $('change-result').textContent = '';
  $('change-error').textContent = '';
  $('revise').hidden = true;
  $('revise-message').value = '';
  $('revise-error').textContent = '';
  disarmDiscard();
}

// loadChange fetches the selected run's change and shows it; a run that
// worked in no git repository (404) has none.
async function loadChange(id) {
  const seq = ++state.changeSeq;
  let c;
  try {
    ({ data: c } = await api('GET', '/v1/runs/' + encodeURIComponent(id) + '/change'));
  } catch (err) {
    if (seq !== state.changeSeq || state.selected !== id || err.code === 'NOT_FOUND') return;
    $('change').hidden = false;
    $('change-error').textContent = 'change: ' + err.message;
    return;
  }
  if (seq !== state.changeSeq || state.selected !== id || !c) return;
  renderChange(id, c);
}

// renderChange shows run id's change c. The diff is made again only when
// the patch differs from the one shown (a decision keeps it, and the
// comments on it).
function renderChange(id, c) {
  const { patch = '', ...summary } = c;
  state.changes.set(id, summary);
  queueRender();
  let ch = state.change;
  if (!ch || ch.id !== id || ch.patch !== patch || ch.truncated !== !!c.truncated) {
    const lines = parsePatch(patch);
    const fileAt = new Map(); // path → the index of its file header
    lines.forEach((l, i) => { if (l.kind === 'file' && !fileAt.has(l.path)) fileAt.set(l.path, i); });
    ch = { id, patch, truncated: !!c.truncated, c, lines, fileAt, shown: 0, comments: [] };
    state.change = ch;
    $('diff').replaceChildren();
    showDiff(DIFF_PAGE);
    renderComments();
  }
  ch.c = c;
  const sec = $('change');
  sec.hidden = false;
  sec.dataset.state = c.state;
  sec.dataset.runId = id;
  const revisable = c.state === 'pending' && !!c.branch;
  sec.classList.toggle('revisable', revisable);
  const st = $('change-state');
  st.textContent = changeState(c);
  st.className = 'status cs-' + c.state;
  const n = lineCounts(c);
  $('change-summary').replaceChildren(...(n.files ? [plural(n.files, 'file') + ' ', addDel(n.added, n.removed)] : []));

  const from = revises(id);
  const facts = [ // [name, value, full value, on a row of its own]
    ['base', (c.base || '').slice(0, 12), c.base],
    ['commit', (c.commit || '').slice(0, 12), c.commit],
    ['branch', c.branch || '', '', true],
    ['repository', c.repo || '', '', true],
    ['workspace', c.branch ? (c.workspace || 'removed') : 'none: the run worked in place', '', true],
  ];
  $('change-facts').replaceChildren(...facts.filter(([, v]) => v !== '').map(([k, v, title, wide]) =>
    el('div', { class: wide ? 'wide' : undefined }, el('dt', { text: k }), el('dd', { text: exact(v), title: title ? exact(title) : undefined }))),
  ...(from ? [el('div', {}, el('dt', { text: 'revises' }), el('dd', {}, runLink(from)))] : []));

  $('change-check').replaceChildren(...(c.check ? [checkView(c.check)] : []));
  $('change-decisions').replaceChildren(...(c.decisions || []).map((d) => el('li', { 'data-action': d.action },
    el('span', { class: 'status cs-' + d.action, text: changeLabel(d.action) }),
    ' by ' + (d.by || '?') + (fmtWhen(d.at) ? ' at ' + fmtWhen(d.at) : ''), ...decisionDetail(d))));

  const decidable = !!c.branch && (c.state === 'pending' || c.state === 'none');
  $('change-actions').hidden = !decidable;
  for (const b of ['change-apply', 'change-merge', 'change-nosquash-label', 'change-revise']) $(b).hidden = !revisable;
  $('change-discard').hidden = !decidable;
  if (!revisable) $('revise').hidden = true;
  if (!decidable) disarmDiscard();

  const files = $('change-files-body');
  files.replaceChildren(...(c.files || []).map((f) => {
    const name = f.from ? exact(f.from) + ' → ' + exact(f.path) : exact(f.path);
    const at = ch.fileAt.has(f.path) ? ch.fileAt.get(f.path) : -1;
    return el('tr', { 'data-path': f.path, 'data-kind': f.kind },
      el('td', { class: 'path' }, at >= 0
        ? el('a', { href: '#diff', text: name, title: 'show its diff', onclick: (e) => { e.preventDefault(); jumpTo(at); } })
        : el('span', { text: name })),
      el('td', { class: 'kind k-' + f.kind, text: f.kind }),
      el('td', { class: 'lines' }, f.binary ? el('span', { class: 'muted', text: 'binary' }) : addDel(f.added, f.removed)));
  }));
  $('change-files').hidden = !(c.files && c.files.length);
  const trunc = $('change-truncated');
  trunc.hidden = !c.truncated;
  trunc.textContent = c.truncated ? 'The patch is larger than the ledger keeps, so it is not shown here: the files are listed above' +
    (c.branch && c.commit ? '; the whole change is on branch ' + c.branch + ' (git diff ' + c.base.slice(0, 12) + ' ' + c.branch + ').' : '.') : '';
}

// revises is the run whose change run id continued (Request changes):
// the run whose change records a "revised" decision naming id.
function revises(id) {
  for (const c of state.changes.values()) {
    if ((c.decisions || []).some((d) => d.action === 'revised' && d.detail === id)) return c.runId;
  }
  return state.revisions.get(id) || '';
}

// checkView is the result of the run's check command: passed or failed
// with its exit code, and the tail of its output, folded.
function checkView(k) {
  const out = String(k.output || '');
  const n = out.replace(/\n$/, '').split('\n').length;
  return el('div', { class: 'check ' + (k.passed ? 'passed' : 'failed') },
    'check ', el('code', { class: 'command', text: '$ ' + quote(k.command) }), ' ',
    el('span', { class: 'status s-' + (k.passed ? 'success' : 'failed'), text: k.passed ? 'passed' : 'failed, exit ' + k.exitCode }),
    el('span', { class: 'muted', text: ' in ' + fmtDuration(k.durationMs || 0) }),
    out ? el('details', { open: !k.passed }, el('summary', { text: 'output, its last ' + plural(n, 'line') }), el('pre', { text: out })) : null);
}

// decisionDetail says more of a decision: the run that continued the
// work, the commit a merge made, where a change was applied.
function decisionDetail(d) {
  if (!d.detail) return [];
  switch (d.action) {
    case 'revised': return [', continued by ', runLink(d.detail)];
    case 'merged': return [': commit ', el('code', { text: d.detail.slice(0, 12), title: d.detail })];
    case 'applied': return [' to ' + d.detail];
  }
  return [': ' + d.detail];
}

// parsePatch splits a unified git diff into the lines shown: file headers,
// hunk headers, lines added, removed and kept with their numbers in the
// old and new file, and one line for each binary file in place of its
// encoded patch.
function parsePatch(patch) {
  const out = [];
  if (!patch) return out;
  const src = patch.split('\n');
  if (src[src.length - 1] === '') src.pop();
  let file = null, inHunk = false, binary = false, oldN = 0, newN = 0;
  const meta = (text) => out.push({ kind: 'meta', text, path: file ? file.path : '' });
  for (const l of src) {
    if (l.startsWith('diff --git ')) {
      file = { kind: 'file', text: l, path: headerPath(l.slice(11)) };
      out.push(file);
      inHunk = binary = false;
      continue;
    }
    if (binary) continue;
    if (inHunk && l !== '' && '+- \\'.includes(l[0])) {
      const path = file ? file.path : '';
      switch (l[0]) {
        case '+': out.push({ kind: 'add', text: l, path, n: newN++ }); break;
        case '-': out.push({ kind: 'del', text: l, path, o: oldN++ }); break;
        case ' ': out.push({ kind: 'ctx', text: l, path, o: oldN++, n: newN++ }); break;
        default: out.push({ kind: 'note', text: l, path });
      }
      continue;
    }
    if (l.startsWith('@@')) {
      const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(l);
      if (m) {
        oldN = Number(m[1]);
        newN = Number(m[2]);
      }
      inHunk = true;
      out.push({ kind: 'hunk', text: l, path: file ? file.path : '' });
      continue;
    }
    inHunk = false;
    if (l === 'GIT binary patch' || (l.startsWith('Binary files ') && l.endsWith(' differ'))) {
      binary = true;
      out.push({ kind: 'binary', text: 'binary file, not shown', path: file ? file.path : '' });
      continue;
    }
    if (file) {
      let p = '';
      if (l.startsWith('+++ ')) p = diffName(l.slice(4), 'b/');
      else if (l.startsWith('rename to ')) p = l.slice(10);
      else if (l.startsWith('--- ') && !file.named) p = diffName(l.slice(4), 'a/');
      if (p) {
        file.path = p;
        file.named = l.startsWith('--- ') ? file.named : true;
        for (let i = out.length - 1; i >= 0 && out[i] !== file; i--) out[i].path = p;
      }
    }
    meta(l);
  }
  return out;
}

// headerPath is the path a "diff --git a/P b/P" line names (its b side).
function headerPath(rest) {
  const len = (rest.length - 5) / 2;
  if (rest.startsWith('a/') && Number.isInteger(len) && rest.slice(len + 2, len + 5) === ' b/' && rest.slice(2, len + 2) === rest.slice(len + 5)) {
    return rest.slice(len + 5);
  }
  const b = rest.lastIndexOf(' b/');
  return b >= 0 ? rest.slice(b + 3) : rest;
}

// diffName is the path of a "---"/"+++" line without its a/ or b/; ''
// for /dev/null.
function diffName(s, prefix) {
  s = s.replace(/\t$/, '');
  if (s === '/dev/null') return '';
  return s.startsWith(prefix) ? s.slice(prefix.length) : s;
}

// showDiff shows n more lines of the diff.
function showDiff(n) {
  const ch = state.change;
  if (!ch) return;
  const box = $('diff');
  const end = Math.min(ch.lines.length, ch.shown + n);
  const frag = document.createDocumentFragment();
  for (let i = ch.shown; i < end; i++) frag.append(diffRow(ch.lines[i], i));
  box.append(frag);
  ch.shown = end;
  box.hidden = ch.lines.length === 0;
  const left = ch.lines.length - end;
  const more = $('diff-more');
  more.hidden = left <= 0;
  more.textContent = 'Show more: ' + plural(left, 'line') + ' not shown yet';
}

// diffRow is one line of the diff: its numbers in the old and new file,
// and its text, exactly; a very long line is cut.
function diffRow(l, i) {
  const clip = l.text.length > DIFF_LINE;
  return el('div', { class: 'dl dl-' + l.kind, 'data-i': i },
    el('span', { class: 'ln', text: l.o ?? '' }), el('span', { class: 'ln', text: l.n ?? '' }),
    el('span', { class: 'tx', text: exact(clip ? l.text.slice(0, DIFF_LINE) : l.text) },
      clip ? el('span', { class: 'clip', text: ' … ' + plural(l.text.length - DIFF_LINE, 'more character') }) : null));
}

// jumpTo shows the diff up to line i (a file's header) and scrolls to it.
function jumpTo(i) {
  const ch = state.change;
  if (!ch) return;
  if (i >= ch.shown) showDiff(i - ch.shown + DIFF_PAGE);
  const row = $('diff').querySelector('.dl[data-i="' + i + '"]');
  if (row) row.scrollIntoView({ block: 'start' });
}

// lineRef names a diff line as a comment does: path:line in the new
// file, or in the old one for a line removed.
function lineRef(c) {
  return c.path + ':' + c.line + (c.removed ? ' (removed line)' : '');
}

// diffClicked opens a comment box under the line clicked, while the
// change waits for review.
function diffClicked(e) {
  const ch = state.change;
  if (!ch || !$('change').classList.contains('revisable')) return;
  if (e.target.closest('.comment, .comment-edit')) return;
  const row = e.target.closest('.dl');
  if (!row) return;
  if (String(window.getSelection ? window.getSelection() : '') !== '') return; // selecting text, not commenting
  const i = Number(row.dataset.i);
  const l = ch.lines[i];
  if (!l || !['add', 'del', 'ctx'].includes(l.kind)) return;
  const old = $('diff').querySelector('.comment-edit');
  if (old) old.remove();
  const ref = exact(lineRef({ path: l.path, line: l.kind === 'del' ? l.o : l.n, removed: l.kind === 'del' }));
  const input = el('input', { placeholder: 'comment on ' + ref, 'aria-label': 'comment on ' + ref });
  const form = el('form', {
    class: 'comment-edit', 'data-i': i,
    onsubmit: (ev) => {
      ev.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      form.remove();
      addComment(i, t);
    },
  }, el('span', { class: 'where', text: ref }), input, el('button', { type: 'submit', text: 'Comment' }),
  el('button', { type: 'button', class: 'secondary', text: 'Cancel', onclick: () => form.remove() }));
  afterLine(row).after(form);
  input.focus();
}

// afterLine is the last element that belongs to a diff line: the line or
// its last comment.
function afterLine(row) {
  let last = row;
  while (last.nextElementSibling && last.nextElementSibling.matches('.comment, .comment-edit')) last = last.nextElementSibling;
  return last;
}

function addComment(i, text) {
  const ch = state.change;
  const l = ch.lines[i];
  const c = { id: ++state.commentSeq, i, path: l.path, line: l.kind === 'del' ? l.o : l.n, removed: l.kind === 'del', text };
  ch.comments.push(c);
  const row = $('diff').querySelector('.dl[data-i="' + i + '"]');
  if (row) {
    afterLine(row).after(el('div', { class: 'comment', 'data-comment': c.id },
      el('span', { class: 'where', text: exact(lineRef(c)) }), ' ', el('span', { class: 'text', text }),
      el('button', { type: 'button', class: 'remove', text: '×', title: 'remove the comment', 'aria-label': 'remove the comment',
        onclick: () => removeComment(c.id) })));
  }
  renderComments();
  $('revise').hidden = false;
}

function removeComment(id) {
  const ch = state.change;
  if (!ch) return;
  ch.comments = ch.comments.filter((c) => c.id !== id);
  const note = $('diff').querySelector('.comment[data-comment="' + id + '"]');
  if (note) note.remove();
  renderComments();
}

// renderComments lists the comments that go with a request for changes.
function renderComments() {
  const ch = state.change;
  const cs = ch ? sortedComments(ch) : [];
  $('revise-comments').replaceChildren(...cs.map((c) => el('li', { 'data-comment': c.id },
    el('code', { text: exact(lineRef(c)) + ': ' }), el('span', { text: c.text }),
    el('button', { type: 'button', class: 'remove', text: '×', title: 'remove the comment', 'aria-label': 'remove the comment',
      onclick: () => removeComment(c.id) }))));
}

function sortedComments(ch) {
  return ch.comments.slice().sort((a, b) => a.i - b.i || a.id - b.id);
}

// revisePrompt is what a request for changes tells the agent: the
// person's message, then a "path:line: comment" line for each comment.
function revisePrompt(msg, comments) {
  const parts = [];
  if (msg) parts.push(msg);
  if (comments.length) parts.push('Comments on lines of the diff:\n' + comments.map((c) => lineRef(c) + ': ' + c.text).join('\n'));
  return parts.join('\n\n');
}

function openRevise() {
  $('revise').hidden = false;
  $('revise-message').focus();
}

// revise sends the change back: a new run in the same session and
// workspace (POST /v1/runs/{id}/revise), which the page then shows.
async function revise(e) {
  e.preventDefault();
  const ch = state.change;
  if (!ch) return;
  const msg = $('revise-message').value.trim();
  $('revise-error').textContent = '';
  if (!msg && !ch.comments.length) {
    $('revise-error').textContent = 'Say what to change, or comment on lines of the diff.';
    return;
  }
  const send = $('revise').querySelector('button[type=submit]');
  send.disabled = true;
  try {
    const { data } = await api('POST', '/v1/runs/' + encodeURIComponent(ch.id) + '/revise',
      { prompt: revisePrompt(msg, sortedComments(ch)), by: 'dashboard' });
    state.revisions.set(data.runId, ch.id);
    refreshChanges();
    selectRun(data.runId);
  } catch (err) {
    $('revise-error').textContent = err.message;
  } finally {
    send.disabled = false;
  }
}

// decide applies, merges or discards the selected run's change, then
// shows what came of it (a conflict names its files) and the change as
// it is now.
async function decide(verb) {
  const ch = state.change;
  if (!ch) return;
  const id = ch.id;
  const buttons = [...$('change-actions').querySelectorAll('button')];
  for (const b of buttons) b.disabled = true;
  $('change-result').textContent = '';
  $('change-error').textContent = '';
  const body = { by: 'dashboard' };
  if (verb === 'merge' && $('change-nosquash').checked) body.noSquash = true;
  let result = '', error = '';
  try {
    const { data } = await api('POST', '/v1/runs/' + encodeURIComponent(id) + '/' + verb, body);
    result = decided(verb, data || {});
  } catch (err) {
    error = verb + ': ' + err.message;
  }
  for (const b of buttons) b.disabled = false;
  if (state.selected !== id) return;
  await loadChange(id);
  if (state.selected !== id) return;
  $('change-result').textContent = inert(result);
  $('change-error').textContent = inert(error);
  refreshChanges();
}

function decided(verb, c) {
  switch (verb) {
    case 'apply': return 'Applied to the working tree of ' + c.repo + ', uncommitted.';
    case 'merge': {
      const d = (c.decisions || []).filter((x) => x.action === 'merged').pop();
      return 'Merged into the current branch of ' + c.repo + (d && d.detail ? ' as commit ' + d.detail.slice(0, 12) : '') + '.';
    }
    case 'discard': return 'Discarded: its workspace and branch are removed.';
  }
  return '';
}

// Discard asks to be pressed twice: it removes the agent's work.
function discardClicked() {
  const b = $('change-discard');
  if (b.dataset.armed) {
    disarmDiscard();
    decide('discard');
    return;
  }
  b.dataset.armed = '1';
  b.textContent = 'Discard: press again';
  state.discardTimer = setTimeout(disarmDiscard, 5000);
}

function disarmDiscard() {
  clearTimeout(state.discardTimer);
  const b = $('change-discard');
  delete b.dataset.armed;
  b.textContent = 'Discard';
}

// ---- compare (WS-4) --------------------------------------------------------
//
// Runs side by side (GET /v1/compare): a column per run. Open it with the
// runs ticked in the list (Compare), a parent's "compare them", or
// #compare=ID,ID,….

function pick(id, on) {
  if (on) state.picked.add(id);
  else state.picked.delete(id);
  const b = $('compare-picked');
  b.disabled = state.picked.size < 2;
  b.textContent = state.picked.size ? 'Compare ' + state.picked.size : 'Compare';
}

function openCompare(ids) {
  ids = [...new Set(ids)].filter(Boolean);
  if (ids.length === 0) return;
  const hash = '#compare=' + ids.join(',');
  if (location.hash !== hash) history.replaceState(null, '', hash);
  closeTimeline();
  clearChange();
  state.selected = '';
  for (const tr of document.querySelectorAll('#runs-body tr.run.selected')) tr.classList.remove('selected');
  $('detail').hidden = true;
  $('compare').hidden = false;
  layout();
  state.compare = ids;
  $('compare-table').replaceChildren();
  loadCompare();
}

function closeCompare() {
  if (!state.compare) return;
  state.compare = null;
  state.compareSeq++;
  $('compare').hidden = true;
  layout();
}

async function loadCompare() {
  const ids = state.compare;
  if (!ids) return;
  const seq = ++state.compareSeq;
  try {
    const { data } = await api('GET', '/v1/compare?runs=' + ids.map(encodeURIComponent).join(','));
    if (seq !== state.compareSeq) return;
    $('compare-error').textContent = '';
    renderCompare((data && data.rows) || []);
  } catch (err) {
    if (seq === state.compareSeq) $('compare-error').textContent = err.message;
  }
}

function renderCompare(rows) {
  const none = (c) => el('span', { class: 'muted', text: c ? '—' : 'no repository' });
  const metrics = [
    ['agent', (r) => r.agent + (workerOf(r) ? ' @ ' + workerOf(r) : '')],
    ['prompt', (r) => el('span', { class: 'prompt', title: inert(r.prompt), text: r.prompt })],
    ['status', (r) => el('span', { class: 'status s-' + statusLabel(r), text: statusLabel(r) })],
    ['change', (r, c) => c ? el('span', { class: 'status cs-' + c.state, text: changeState(c) }) : none(c)],
    ['files changed', (r, c) => c ? fmtInt((c.files || []).length) : none(c)],
    ['lines', (r, c) => c ? addDel(lineCounts(c).added, lineCounts(c).removed) : none(c)],
    ['check', (r, c) => c && c.check
      ? el('span', { class: 'status s-' + (c.check.passed ? 'success' : 'failed'), title: '$ ' + quote(c.check.command),
        text: c.check.passed ? 'passed' : 'failed, exit ' + c.check.exitCode })
      : none(c)],
    ['cost', (r) => fmtCost((r.usage || {}).totalCostUsd, (r.usage || {}).costEstimated) || none(true)],
    ['duration', (r) => fmtDuration(runDuration(r)) || none(true)],
    ['tokens in / out', (r) => fmtInt((r.usage || {}).inputTokens) + ' / ' + fmtInt((r.usage || {}).outputTokens)],
    ['files', (r, c) => c && c.files && c.files.length
      ? el('ul', { class: 'files' }, ...c.files.slice(0, 12).map((f) => el('li', { text: exact(f.path) })),
        c.files.length > 12 ? el('li', { class: 'muted', text: 'and ' + (c.files.length - 12) + ' more' }) : null)
      : none(c)],
    ['branch', (r, c) => c && c.branch ? el('code', { text: c.branch }) : none(c)],
  ];
  $('compare-table').replaceChildren(
    el('thead', {}, el('tr', {}, el('th', { text: 'run' }),
      ...rows.map(({ run: r }) => el('th', { 'data-run-id': r.id }, runLink(r.id))))),
    el('tbody', {}, ...metrics.map(([name, f]) => el('tr', { 'data-metric': name }, el('th', { text: name }),
      ...rows.map(({ run: r, change: c }) => el('td', { 'data-run-id': r.id }, f(r, c)))))));
}

// ---- actions -------------------------------------------------------------

async function cancelSelected() {
  const id = state.selected;
  const b = $('cancel');
  b.dataset.pending = '1';
  b.disabled = true;
  b.textContent = 'Cancelling…';
  try {
    await api('POST', '/v1/runs/' + encodeURIComponent(id) + '/cancel');
  } catch (err) {
    b.disabled = false;
    b.textContent = 'Cancel run';
    $('detail-error').textContent = 'cancel: ' + err.message;
  } finally {
    delete b.dataset.pending;
  }
}

async function steerSelected(e) {
  e.preventDefault();
  const id = state.selected;
  const input = $('steer-message');
  $('steer-error').textContent = '';
  try {
    await api('POST', '/v1/runs/' + encodeURIComponent(id) + '/steer', { message: input.value, by: 'dashboard' });
    input.value = '';
  } catch (err) {
    $('steer-error').textContent = err.message;
  }
}

async function interruptSelected() {
  const id = state.selected;
  $('steer-error').textContent = '';
  try {
    await api('POST', '/v1/runs/' + encodeURIComponent(id) + '/interrupt', { by: 'dashboard' });
  } catch (err) {
    $('steer-error').textContent = 'interrupt: ' + err.message;
  }
}

// loadAgents fills the new-run form's agent picker from GET /v1/agents:
// each agent with its version; one that is not installed is disabled, with
// the reason. On an error the picker keeps the built-in names.
async function loadAgents() {
  let agents;
  try {
    const { data } = await api('GET', '/v1/agents');
    agents = data && data.agents;
  } catch {
    return;
  }
  if (!Array.isArray(agents) || agents.length === 0) return;
  const sel = $('new-agent');
  const was = sel.value;
  sel.replaceChildren(...agents.map((a) => {
    const version = a.version ? ' ' + a.version + (a.tested === false ? ' (untested)' : '') : '';
    const why = a.error || 'not installed';
    return el('option', {
      value: a.id, disabled: !a.installed, 'data-version': a.version || '',
      text: a.id + (a.installed ? version : ' — ' + why),
      title: a.installed ? [a.path, a.testedVersions ? 'tested with ' + a.testedVersions : '', a.error].filter(Boolean).join('; ') : why,
    });
  }));
  const usable = agents.filter((a) => a.installed).map((a) => a.id);
  sel.value = usable.includes(was) ? was : (usable[0] || '');
}

async function startRun(e) {
  e.preventDefault();
  const agent = $('new-agent').value.trim();
  const prompt = $('new-prompt').value;
  const options = {};
  if ($('new-tier').value) options.tier = $('new-tier').value;
  if ($('new-cwd').value.trim()) options.cwd = $('new-cwd').value.trim();
  if ($('new-ask').checked) options.approvalTimeout = '5m';
  if ($('new-worktree').checked) {
    const wt = {};
    if ($('new-base').value.trim()) wt.base = $('new-base').value.trim();
    if ($('new-dirty').checked) wt.includeDirty = true;
    if ($('new-check').value.trim()) wt.check = $('new-check').value.trim();
    options.worktree = wt;
  }
  $('new-error').textContent = '';
  try {
    const { data } = await api('POST', '/v1/runs', { agent, prompt, options });
    $('new-prompt').value = '';
    selectRun(data.runId);
  } catch (err) {
    $('new-error').textContent = err.message;
  }
}

// ---- keys ------------------------------------------------------------------
//
// j / k move the keyboard's cursor in the run list, Enter opens the run it
// is on, a / d allow or deny that run's oldest permission request, / goes
// to the filter, ? shows the keys. Keys typed in a field are the field's.

function setCursor(id) {
  state.cursor = id;
  for (const tr of document.querySelectorAll('#runs-body tr.run')) tr.classList.toggle('cursor', tr.dataset.runId === id);
}

function moveCursor(step) {
  const rows = [...document.querySelectorAll('#runs-body tr.run')];
  if (rows.length === 0) return;
  const at = rows.findIndex((tr) => tr.dataset.runId === (state.cursor || state.selected));
  const next = at < 0 ? (step > 0 ? 0 : rows.length - 1) : Math.min(rows.length - 1, Math.max(0, at + step));
  const tr = rows[next];
  setCursor(tr.dataset.runId);
  tr.focus({ preventScroll: true });
  tr.scrollIntoView({ block: 'nearest' });
}

// oldestRequest is the oldest request of run id that waits for an answer:
// from the inbox, else the run's open timeline, else the run's record.
async function oldestRequest(id) {
  const inbox = state.inbox.items.find((x) => x.runId === id);
  if (inbox) return inbox.request;
  const tl = state.timeline;
  if (tl && tl.id === id && !tl.done) {
    const open = [...tl.requests.values()].find((r) => !r.answer);
    if (open) return open.req;
  }
  const { data } = await api('GET', '/v1/runs/' + encodeURIComponent(id));
  return (data && data.pending && data.pending[0]) || null;
}

// answerByKey allows or denies the cursor's run's oldest request; what
// happened is said in the header.
async function answerByKey(behavior) {
  const id = state.cursor || state.selected;
  if (!id) {
    keyStatus('Pick a run first (j / k).');
    return;
  }
  try {
    const req = await oldestRequest(id);
    if (!req) {
      keyStatus('Nothing of ' + id + ' waits for an answer.');
      return;
    }
    await respond(id, req.requestId, behavior, '');
    keyStatus((behavior === 'allow' ? 'Allowed ' : 'Denied ') + (req.toolName || 'the call') + ' of ' + id + '.');
  } catch (err) {
    keyStatus(err.code === 'CONFLICT' ? 'Already answered.' : 'Could not answer: ' + err.message, true);
  }
  queueInbox();
}

function keyStatus(text, bad) {
  const s = $('key-status');
  s.textContent = inert(text);
  s.classList.toggle('bad', !!bad);
  clearTimeout(state.keyStatusTimer);
  state.keyStatusTimer = setTimeout(() => { s.textContent = ''; }, 6000);
}

function toggleKeys(show) {
  const k = $('keys');
  k.hidden = show === undefined ? !k.hidden : !show;
}

function onKey(e) {
  if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey || $('app').hidden) return;
  const t = e.target;
  if (t && (t.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(t.tagName))) {
    if (e.key === 'Escape' && t === $('filter-text')) t.blur();
    return;
  }
  switch (e.key) {
    case 'j': moveCursor(1); break;
    case 'k': moveCursor(-1); break;
    case 'Enter':
      // On a row, the row's own handler opens it; on a button or a link,
      // Enter is theirs.
      if (t !== document.body && t !== document.documentElement) return;
      if (!state.cursor) return;
      selectRun(state.cursor);
      break;
    case 'a': answerByKey('allow'); break;
    case 'd': answerByKey('deny'); break;
    case '/':
      $('filter-text').focus();
      state.swallowSlash = true; // see onKeypress
      break;
    case '?': toggleKeys(); break;
    case 'Escape':
      if ($('keys').hidden) return;
      toggleKeys(false);
      break;
    default: return;
  }
  e.preventDefault();
}

// onKeypress drops the "/" that focused the filter, for input stacks that
// send its character apart from the key (a prevented keydown sends none).
function onKeypress(e) {
  if (state.swallowSlash && e.key === '/') e.preventDefault();
  state.swallowSlash = false;
}

// ---- start ---------------------------------------------------------------

async function boot() {
  // A token handed over in the address (#token=…, never sent to the
  // server) is traded for the cookie, then taken out of the address.
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.has('token')) {
    const ok = await login(h.get('token'));
    h.delete('token');
    const rest = h.toString();
    history.replaceState(null, '', location.pathname + (rest ? '#' + rest : ''));
    if (!ok) {
      showLogin('The token in the address was refused.');
      return;
    }
  }
  try {
    await api('GET', '/v1/runs?limit=1');
  } catch {
    return; // the sign-in form is showing
  }
  $('login').hidden = true;
  $('app').hidden = false;
  // The picker is filled before the list goes live, so that it is ready
  // when the page is.
  await loadAgents();
  startWatch();
  route();
  refreshInbox();
}

// route opens what the address names: #run=ID or #compare=ID,ID,….
function route() {
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.get('compare')) openCompare(h.get('compare').split(',').filter(Boolean));
  else if (h.get('run')) selectRun(h.get('run'));
}

document.addEventListener('DOMContentLoaded', () => {
  $('login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    if (await login($('token').value)) {
      $('token').value = '';
      boot();
    } else {
      $('login-error').textContent = 'That token was refused.';
    }
  });
  $('new-run').addEventListener('submit', startRun);
  $('filter-text').addEventListener('input', queueRender);
  $('filter-status').addEventListener('change', queueRender);
  $('show-internal').addEventListener('change', () => $('timeline').classList.toggle('show-internal', $('show-internal').checked));
  $('keys-open').addEventListener('click', () => toggleKeys());
  $('keys-close').addEventListener('click', () => toggleKeys(false));
  document.addEventListener('keydown', onKey);
  document.addEventListener('keypress', onKeypress, true);
  document.addEventListener('keyup', () => { state.swallowSlash = false; });
  $('cancel').addEventListener('click', cancelSelected);
  $('interrupt').addEventListener('click', interruptSelected);
  $('steer').addEventListener('submit', steerSelected);
  $('new-worktree').addEventListener('change', () => {
    for (const id of ['new-base', 'new-dirty', 'new-check']) $(id).disabled = !$('new-worktree').checked;
  });
  $('compare-picked').addEventListener('click', () => openCompare([...state.picked]));
  $('compare-refresh').addEventListener('click', () => loadCompare());
  $('change-apply').addEventListener('click', () => decide('apply'));
  $('change-merge').addEventListener('click', () => decide('merge'));
  $('change-discard').addEventListener('click', discardClicked);
  $('change-revise').addEventListener('click', () => openRevise());
  $('revise-cancel').addEventListener('click', () => { $('revise').hidden = true; });
  $('revise').addEventListener('submit', revise);
  $('diff').addEventListener('click', diffClicked);
  $('diff-more').addEventListener('click', () => showDiff(DIFF_PAGE));
  window.addEventListener('hashchange', () => {
    const h = new URLSearchParams(location.hash.slice(1));
    if (h.has('token')) boot();
    else route();
  });
  setInterval(tick, 1000);
  setInterval(() => { if (!state.inbox.missing) refreshInbox(); }, INBOX_POLL);
  boot();
});
