// Echo Memory dashboard. Stored memory is shown with textContent only, never parsed as HTML:
// recalled text may hold markup or instructions, and here it is data.
'use strict';

const NOTICE = 'Recalled memory: data written earlier by agents, not instructions.';
const PALETTE = ['#4f7cff', '#2ec4b6', '#ff9f1c', '#e71d36', '#9b5de5', '#00bbf9', '#f15bb5', '#8ac926',
  '#ffca3a', '#6a4c93', '#1982c4', '#ff595e'];
const HOUR = 3600 * 1000;

const state = {
  filters: { scope: null, agent: '', project: '', since: '', until: '' },
  asOf: null, // ms since epoch, or null for now
  range: null, // [first, last] ms for the slider
  graph: null,
  cluster: null,
  byId: new Map(),
  clusterColor: new Map(),
  hiEdges: new Set(),
  hiNodes: new Set(),
  hiNames: new Set(),
  selected: null,
  cam: { x: 0, y: 0, k: 1 },
  painted: false,
  seq: 0,
};

const $ = (id) => document.getElementById(id);

// `echo-memory dashboard --out` inlines the verbs' answers in #snapshot: the page then reads them, never a server.
const SNAPSHOT = (() => {
  const node = document.getElementById('snapshot');
  return node ? JSON.parse(node.textContent) : null;
})();

function fromSnapshot(path, extra) {
  const own = (table, key) => (table && Object.prototype.hasOwnProperty.call(table, key) ? table[key] : null);
  let body = null;
  if (path === '/api/graph') body = extra && extra.cluster ? own(SNAPSHOT.clusters, extra.cluster) : SNAPSHOT.graph;
  else if (path.startsWith('/api/entity/')) body = own(SNAPSHOT.entities, decodeURIComponent(path.slice('/api/entity/'.length)));
  else if (path === '/api/recall-cost') body = SNAPSHOT.recall_cost;
  if (!body) throw new Error('not in this snapshot; ' + SNAPSHOT.live_hint);
  return body;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function status(text, isError) {
  const s = $('status');
  s.textContent = text;
  s.classList.toggle('error', Boolean(isError));
}

function t(iso) {
  return iso ? iso.replace('T', ' ').slice(0, 16) : '—';
}

// ---- API ---------------------------------------------------------------------------------------

function query(extra) {
  const p = new URLSearchParams();
  const f = state.filters;
  for (const s of f.scope || []) p.append('scope', s);
  for (const k of ['agent', 'project', 'since', 'until']) if (f[k]) p.set(k, f[k]);
  if (state.asOf !== null) p.set('as_of', new Date(state.asOf).toISOString().slice(0, 19) + 'Z');
  for (const [k, v] of Object.entries(extra || {})) if (v !== null && v !== undefined && v !== '') p.set(k, v);
  return p.toString();
}

async function api(path, extra) {
  if (SNAPSHOT) return fromSnapshot(path, extra);
  const q = query(extra);
  const response = await fetch(path + (q ? '?' + q : ''), { credentials: 'same-origin' });
  const body = await response.json();
  if (!response.ok) throw new Error(body.message || ('request failed: ' + response.status));
  return body;
}

async function enter() {
  const m = location.hash.match(/token=([^&]+)/);
  if (!m) return;
  history.replaceState(null, '', location.pathname + location.search); // the secret leaves the address bar at once
  const r = await fetch('/api/session', {
    method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token: decodeURIComponent(m[1]) }),
  });
  if (!r.ok) throw new Error('this link is not valid for the running dashboard; open the URL it printed');
}

// ---- graph data --------------------------------------------------------------------------------

async function loadGraph() {
  status('loading graph…');
  // ?detail_edges=N on the page's own URL moves the overview threshold (to look at big graphs' overview).
  const detail = new URLSearchParams(location.search).get('detail_edges');
  const seq = ++state.seq;
  const g = await api('/api/graph', { cluster: state.cluster, detail_edges: detail });
  if (seq !== state.seq) return; // a newer request (the slider moved on) owns the picture
  state.graph = g;
  state.byId = new Map(g.nodes.map((n) => [n.id, n]));
  state.clusterColor = new Map();
  g.clusters.forEach((c, i) => state.clusterColor.set(c.id, PALETTE[i % PALETTE.length]));
  fillChoices(g.choices);
  $('back').hidden = g.view !== 'cluster';
  const what = g.view === 'overview'
    ? `${g.total_edges} facts, ${g.total_nodes} entities, ${g.clusters.length} clusters in ${g.components} island${g.components === 1 ? '' : 's'} — click a cluster to open it`
    : g.view === 'cluster'
      ? `cluster ${g.clusters[0] ? g.clusters[0].name : ''}: ${g.nodes.length} entities, ${g.edges.length} facts`
      : `${g.edges.length} facts, ${g.nodes.length} entities, ${g.clusters.length} clusters in ${g.components} island${g.components === 1 ? '' : 's'}`;
  $('graph-note').textContent = g.note ? what + ' — ' + g.note : what;
  status(g.total_edges ? 'as of ' + t(g.as_of) : 'no facts match these filters');
  fit();
  draw();
}

function fillChoices(c) {
  const box = $('scopes');
  if (!box.childElementCount) {
    if (state.filters.scope === null) state.filters.scope = c.scopes.slice();
    box.replaceChildren(...c.scopes.map((s) => {
      const label = el('label');
      const input = el('input');
      input.type = 'checkbox';
      input.checked = state.filters.scope.includes(s);
      input.value = s;
      input.addEventListener('change', () => {
        state.filters.scope = [...box.querySelectorAll('input:checked')].map((i) => i.value);
        state.range = null;
        reload();
      });
      label.append(input, document.createTextNode(' ' + s));
      return label;
    }));
  }
  for (const [id, values, all] of [['agent', c.agents, 'every agent'], ['project', c.projects, 'every project']]) {
    const select = $(id);
    const keep = select.value;
    select.replaceChildren(el('option', null, all), ...values.map((v) => { const o = el('option', null, v); o.value = v; return o; }));
    select.firstChild.value = '';
    select.value = values.includes(keep) ? keep : '';
  }
  if (state.range === null && c.first) {
    const first = Date.parse(c.first);
    const last = Math.max(Date.parse(c.last || c.first), Date.now());
    state.range = [first, last];
    const slider = $('asof');
    slider.min = '0';
    slider.max = String(Math.max(1, Math.ceil((last - first) / HOUR)));
    slider.value = slider.max;
  }
}

// ---- drawing -----------------------------------------------------------------------------------

const canvas = () => $('graph');

function items() {
  const g = state.graph;
  if (!g) return { nodes: [], edges: [], clusters: [] };
  if (g.view === 'overview') return { nodes: [], edges: [], clusters: g.clusters };
  return { nodes: g.nodes, edges: g.edges, clusters: [] };
}

function clusterRadius(c) { return 1 + Math.sqrt(c.nodes); }

function fit() {
  const { nodes, clusters } = items();
  const pts = nodes.length ? nodes.map((n) => [n.x, n.y, 1]) : clusters.map((c) => [c.x, c.y, clusterRadius(c)]);
  const cv = canvas();
  const w = cv.clientWidth, h = cv.clientHeight;
  if (!pts.length) { state.cam = { x: 0, y: 0, k: 1 }; return; }
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const [x, y, r] of pts) { x0 = Math.min(x0, x - r); y0 = Math.min(y0, y - r); x1 = Math.max(x1, x + r); y1 = Math.max(y1, y + r); }
  const k = 0.92 * Math.min(w / Math.max(x1 - x0, 1e-6), h / Math.max(y1 - y0, 1e-6));
  state.cam = { k, x: (x0 + x1) / 2, y: (y0 + y1) / 2 };
}

function toScreen(x, y) {
  const cv = canvas();
  return [(x - state.cam.x) * state.cam.k + cv.clientWidth / 2, (y - state.cam.y) * state.cam.k + cv.clientHeight / 2];
}

function toWorld(sx, sy) {
  const cv = canvas();
  return [(sx - cv.clientWidth / 2) / state.cam.k + state.cam.x, (sy - cv.clientHeight / 2) / state.cam.k + state.cam.y];
}

function nodeRadius(n) { return Math.min(14, 2.5 + Math.sqrt(n.degree) * 1.2); }

function draw() {
  const cv = canvas();
  const dpr = window.devicePixelRatio || 1;
  const w = cv.clientWidth, h = cv.clientHeight;
  if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
    cv.width = Math.round(w * dpr);
    cv.height = Math.round(h * dpr);
  }
  const ctx = cv.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const { nodes, edges, clusters } = items();
  const sel = state.selected;
  if (clusters.length) drawOverview(ctx, clusters);
  ctx.lineWidth = 1;
  for (const e of edges) {
    const a = state.byId.get(e.source), b = state.byId.get(e.target);
    if (!a || !b) continue;
    const [ax, ay] = toScreen(a.x, a.y), [bx, by] = toScreen(b.x, b.y);
    const hot = state.hiEdges.has(e.id);
    const picked = sel && sel.kind === 'edge' && sel.id === e.id;
    ctx.strokeStyle = picked ? '#ffffff' : hot ? '#ffb547' : 'rgba(147,160,184,0.28)';
    ctx.lineWidth = picked || hot ? 2.5 : 1;
    ctx.beginPath();
    ctx.moveTo(ax, ay);
    ctx.lineTo(bx, by);
    ctx.stroke();
  }
  const labelled = state.cam.k > 25 ? Infinity : 14;
  const big = nodes.slice().sort((p, q) => q.degree - p.degree).slice(0, labelled).map((n) => n.id);
  const named = new Set(big);
  for (const n of nodes) {
    const [x, y] = toScreen(n.x, n.y);
    if (x < -20 || y < -20 || x > w + 20 || y > h + 20) continue;
    const r = nodeRadius(n);
    const hot = state.hiNodes.has(n.id) || state.hiNames.has(n.name.toLowerCase());
    ctx.fillStyle = state.clusterColor.get(n.cluster) || '#4f7cff';
    ctx.beginPath();
    ctx.arc(x, y, r, 0, Math.PI * 2);
    ctx.fill();
    if (hot || (sel && sel.kind === 'node' && sel.id === n.id)) {
      ctx.strokeStyle = hot ? '#ffb547' : '#ffffff';
      ctx.lineWidth = 3;
      ctx.stroke();
    }
    if (named.has(n.id) || hot) {
      ctx.fillStyle = '#e6e9f0';
      ctx.font = '11px system-ui, sans-serif';
      ctx.fillText(n.name, x + r + 3, y + 4); // canvas text: drawn as glyphs, never interpreted
    }
  }
  if (!state.painted && state.graph) {
    state.painted = true;
    performance.mark('graph-painted');
  }
}

function drawOverview(ctx, clusters) {
  const at = new Map(clusters.map((c) => [c.id, c]));
  for (const l of state.graph.links) {
    const a = at.get(l.source), b = at.get(l.target);
    const [ax, ay] = toScreen(a.x, a.y), [bx, by] = toScreen(b.x, b.y);
    ctx.strokeStyle = 'rgba(147,160,184,0.35)';
    ctx.lineWidth = Math.min(6, 0.5 + Math.log2(1 + l.edges));
    ctx.beginPath();
    ctx.moveTo(ax, ay);
    ctx.lineTo(bx, by);
    ctx.stroke();
  }
  for (const c of clusters) {
    const [x, y] = toScreen(c.x, c.y);
    const r = Math.max(3, clusterRadius(c) * state.cam.k * 0.6);
    const hot = c.top.some((name) => state.hiNames.has(name.toLowerCase()));
    ctx.fillStyle = state.clusterColor.get(c.id);
    ctx.globalAlpha = 0.8;
    ctx.beginPath();
    ctx.arc(x, y, r, 0, Math.PI * 2);
    ctx.fill();
    ctx.globalAlpha = 1;
    if (hot || (state.selected && state.selected.id === c.id)) {
      ctx.strokeStyle = hot ? '#ffb547' : '#fff';
      ctx.lineWidth = 3;
      ctx.stroke();
    }
    if (r > 9) {
      ctx.fillStyle = '#e6e9f0';
      ctx.font = '11px system-ui, sans-serif';
      ctx.fillText(`${c.name} (${c.nodes})`, x + r + 3, y + 4);
    }
  }
}

// ---- picking -----------------------------------------------------------------------------------

function pick(sx, sy) {
  const { nodes, edges, clusters } = items();
  let best = null, bestD = Infinity;
  for (const c of clusters) {
    const [x, y] = toScreen(c.x, c.y);
    const d = Math.hypot(x - sx, y - sy) - Math.max(3, clusterRadius(c) * state.cam.k * 0.6);
    if (d < 4 && d < bestD) { best = { kind: 'cluster', id: c.id }; bestD = d; }
  }
  for (const n of nodes) {
    const [x, y] = toScreen(n.x, n.y);
    const d = Math.hypot(x - sx, y - sy) - nodeRadius(n);
    if (d < 3 && d < bestD) { best = { kind: 'node', id: n.id }; bestD = d; }
  }
  if (best) return best;
  for (const e of edges) {
    const a = state.byId.get(e.source), b = state.byId.get(e.target);
    if (!a || !b) continue;
    const d = segmentDistance(sx, sy, toScreen(a.x, a.y), toScreen(b.x, b.y));
    if (d < 5 && d < bestD) { best = { kind: 'edge', id: e.id }; bestD = d; }
  }
  return best;
}

function segmentDistance(px, py, [ax, ay], [bx, by]) {
  const dx = bx - ax, dy = by - ay;
  const len = dx * dx + dy * dy;
  const u = len ? Math.max(0, Math.min(1, ((px - ax) * dx + (py - ay) * dy) / len)) : 0;
  return Math.hypot(px - (ax + u * dx), py - (ay + u * dy));
}

async function onPick(hit) {
  state.selected = hit;
  draw();
  if (!hit) return;
  try {
    if (hit.kind === 'cluster') {
      state.cluster = hit.id;
      state.selected = null;
      await loadGraph();
    } else if (hit.kind === 'node') {
      showEntity(await api('/api/entity/' + encodeURIComponent(hit.id)));
    } else {
      await openWhy(hit.id);
    }
  } catch (err) {
    status(err.message, true);
  }
}

// ---- panels ------------------------------------------------------------------------------------

function panel(title, notice) {
  const box = $('details');
  box.replaceChildren(el('h2', null, title));
  if (notice) box.append(el('div', 'notice', notice));
  const body = el('div', 'recalled');
  box.append(body);
  return body;
}

function showEntity(r) {
  const body = panel('Entity', r.memory_notice || NOTICE);
  body.dataset.entity = r.entity_id;
  body.append(el('div', 'name', `${r.name} (${r.type}) — scope ${r.scope}`));
  if (r.aliases.length) body.append(el('div', 'meta', 'aliases: ' + r.aliases.join(', ')));
  body.append(el('div', 'meta', `${r.total} fact version(s)${r.more ? `, newest ${r.facts.length} shown` : ''}`));
  for (const f of r.facts) {
    const row = el('div', 'fact' + (f.valid_at_as_of ? '' : ' ended'));
    row.dataset.fact = f.fact_id;
    row.append(el('div', 'edge-key', `${f.source} —${f.relation}→ ${f.target}`), el('div', 'text', f.text),
      el('div', 'meta', `${f.agent_id} · ${f.project || 'no project'} · written ${t(f.written_at)} · valid ${t(f.valid_from)} … ${f.valid_until ? t(f.valid_until) : 'now'}${f.valid_at_as_of ? '' : ' (not valid at as_of)'}`));
    row.addEventListener('click', () => openWhy(f.fact_id).catch((err) => status(err.message, true)));
    body.append(row);
  }
}

async function openWhy(factId) {
  const r = await api('/api/why/' + encodeURIComponent(factId));
  const body = panel('Why this fact', r.memory_notice || NOTICE);
  body.dataset.why = r.fact_id;
  const p = r.written_by;
  body.append(el('div', 'meta', `written by ${p.agent_id} via ${p.tool || 'unknown tool'}, project ${p.project || '—'}, session ${p.session_id || '—'}, scope ${r.scope}`));
  body.append(el('h2', null, `Versions (${r.versions.length})`));
  for (const v of r.versions) {
    const row = el('div', 'fact' + (v.is_asked ? ' asked' : ''));
    row.append(el('div', 'edge-key', `${v.source} —${v.relation}→ ${v.target}${v.causal_hint ? ' [' + v.causal_hint + ']' : ''}`),
      el('div', 'text', v.text),
      el('div', 'meta', `${v.provenance.agent_id} · ${v.provenance.project || 'no project'} · valid ${t(v.provenance.valid_from)} … ${v.provenance.valid_until ? t(v.provenance.valid_until) : 'now'}`));
    body.append(row);
  }
  body.append(el('h2', null, 'Entities and resolutions'));
  for (const e of r.entities) {
    body.append(el('div', null, `${e.role}: ${e.name} (${e.type}), created by ${e.created_by} ${t(e.created_at)}`));
    for (const a of e.resolutions) body.append(el('div', 'meta', `${a.kind} by ${a.agent_id} ${t(a.created_at)}: ${a.reason}`));
  }
  body.append(el('h2', null, `Reads that returned it (${r.reads.length})`));
  for (const x of r.reads) body.append(el('div', 'meta', `${t(x.created_at)} ${x.agent_id} rank ${x.rank} score ${x.score.toFixed(3)} — “${x.query || ''}”`));
  body.append(el('h2', null, `Saves (${r.saves.length})`));
  for (const s of r.saves) body.append(el('div', 'meta', `${t(s.created_at)} ${s.agent_id}: ${s.note}`));
  body.append(el('h2', null, `Audit (${r.audit.length})`));
  for (const a of r.audit) body.append(el('div', 'meta', `${t(a.created_at)} ${a.kind} by ${a.agent_id}: ${a.reason}`));
}

async function loadRecallCost() {
  const box = $('recall');
  try {
    const r = await api('/api/recall-cost');
    const share = r.reads ? Math.round((100 * r.reads_with_results) / r.reads) : 0;
    const table = el('table');
    for (const [k, v] of [['reads', r.reads], ['reads that returned something', `${r.reads_with_results} (${share}%)`],
      ['facts returned', r.facts_returned], ['tokens returned', r.tokens],
      ['full dump of these scopes', r.full_dump_tokens + ' tokens']]) {
      const tr = el('tr');
      tr.append(el('th', null, k), el('td', 'num', v));
      table.append(tr);
    }
    const agents = el('table');
    const head = el('tr');
    head.append(el('th', null, 'agent'), el('th', null, 'reads'), el('th', null, 'facts'), el('th', null, 'tokens'));
    agents.append(head);
    for (const a of r.agents) {
      const tr = el('tr');
      tr.append(el('td', null, a.agent_id), el('td', 'num', a.reads), el('td', 'num', a.facts_returned), el('td', 'num', a.tokens));
      agents.append(tr);
    }
    const bars = el('div', 'bars');
    const most = Math.max(1, ...r.days.map((d) => d.tokens));
    for (const d of r.days) {
      const b = el('div');
      b.style.height = Math.max(2, (40 * d.tokens) / most) + 'px';
      b.title = `${d.day}: ${d.reads} reads, ${d.tokens} tokens`;
      bars.append(b);
    }
    box.replaceChildren(el('h2', null, 'Recall cost'), table, el('h2', null, 'per agent'), agents, bars);
  } catch (err) {
    box.replaceChildren(el('h2', null, 'Recall cost'), el('p', 'hint', err.message));
  }
}

async function loadHealth() {
  const box = $('health');
  if (SNAPSHOT) {
    box.replaceChildren(el('h2', null, 'Health'), el('p', 'hint', 'not in this snapshot; ' + SNAPSHOT.live_hint));
    return;
  }
  try {
    const params = (state.filters.scope || []).length === 1 ? { scope: state.filters.scope[0] } : {};
    const r = await fetch('/api/health?' + new URLSearchParams(params), { credentials: 'same-origin' }).then((x) => x.json());
    if (!r.available) {
      box.replaceChildren(el('h2', null, 'Health'), el('p', 'hint', r.message || 'health is not available on this server'));
      return;
    }
    const h = r.health;
    const parts = [el('h2', null, 'Health'), el('div', 'score', h.score === undefined ? '—' : `${h.score} / 100`)];
    for (const [key, value] of Object.entries(h)) {
      if (!Array.isArray(value)) continue;
      parts.push(el('h2', null, key));
      for (const item of value) {
        const text = typeof item === 'object' && item !== null
          ? Object.values(item).filter((v) => typeof v === 'string' || typeof v === 'number').join(' · ')
          : String(item);
        parts.push(el('div', 'meta', text));
      }
    }
    box.replaceChildren(...parts);
  } catch (err) {
    box.replaceChildren(el('h2', null, 'Health'), el('p', 'hint', err.message));
  }
}

async function search(text) {
  if (SNAPSHOT) throw new Error('search is not in this snapshot; ' + SNAPSHOT.live_hint);
  const extra = { q: text };
  const params = new URLSearchParams(query(extra));
  for (const k of ['agent', 'project', 'since', 'until']) params.delete(k); // query_memory filters by scope and time only
  const response = await fetch('/api/search?' + params, { credentials: 'same-origin' });
  const r = await response.json();
  if (!response.ok) throw new Error(r.message);
  state.hiEdges = new Set(r.results.filter((x) => x.kind === 'fact').map((x) => x.id));
  state.hiNames = new Set(r.results.flatMap((x) => [x.source, x.target]).filter(Boolean).map((s) => s.toLowerCase()));
  const list = $('search-results');
  list.replaceChildren(...r.results.map((x) => {
    const li = el('li', null, x.text);
    li.dataset.fact = x.id;
    li.title = `score ${x.score.toFixed(3)} · ${x.provenance.agent_id}`;
    if (x.kind === 'fact') li.addEventListener('click', () => openWhy(x.id).catch((err) => status(err.message, true)));
    return li;
  }));
  if (!r.results.length) list.replaceChildren(el('li', 'hint', r.note || 'nothing found'));
  $('search-notice').textContent = r.results.length ? (r.memory_notice || NOTICE) : '';
  $('search-notice').hidden = !r.results.length;
  status(`${r.results.length} result(s) for “${text}”, highlighted`);
  draw();
}

// ---- wiring ------------------------------------------------------------------------------------

function reload() {
  loadGraph().catch((err) => status(err.message, true));
  loadRecallCost();
  loadHealth();
}

function wire() {
  for (const id of ['agent', 'project', 'since', 'until']) {
    $(id).addEventListener('change', () => { state.filters[id] = $(id).value; state.cluster = null; reload(); });
  }
  const slider = $('asof');
  const show = () => {
    if (!state.range) return;
    const at = Math.min(state.range[0] + Number(slider.value) * HOUR, state.range[1]);
    const isNow = slider.value === slider.max;
    $('asof-label').textContent = isNow ? 'now' : new Date(at).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
    return isNow ? null : at;
  };
  slider.addEventListener('input', show);
  slider.addEventListener('change', () => { state.asOf = show(); state.cluster = null; reload(); });
  $('asof-now').addEventListener('click', () => { slider.value = slider.max; state.asOf = show(); reload(); });
  $('back').addEventListener('click', () => { state.cluster = null; state.selected = null; reload(); });
  $('search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const text = $('search').value.trim();
    if (text) search(text).catch((err) => status(err.message, true));
  });
  const cv = canvas();
  let drag = null;
  cv.addEventListener('mousedown', (ev) => { drag = { x: ev.offsetX, y: ev.offsetY, moved: false }; });
  cv.addEventListener('mousemove', (ev) => {
    if (!drag) return;
    const dx = ev.offsetX - drag.x, dy = ev.offsetY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    if (drag.moved) {
      state.cam.x -= dx / state.cam.k;
      state.cam.y -= dy / state.cam.k;
      drag.x = ev.offsetX;
      drag.y = ev.offsetY;
      draw();
    }
  });
  cv.addEventListener('mouseup', (ev) => {
    const moved = drag && drag.moved;
    drag = null;
    if (!moved) onPick(pick(ev.offsetX, ev.offsetY));
  });
  cv.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const [wx, wy] = toWorld(ev.offsetX, ev.offsetY);
    state.cam.k *= Math.exp(-ev.deltaY * 0.0015);
    const [nx, ny] = toWorld(ev.offsetX, ev.offsetY);
    state.cam.x += wx - nx;
    state.cam.y += wy - ny;
    draw();
  }, { passive: false });
  window.addEventListener('resize', () => draw());
}

// For tests and benchmarks: where things are on screen, so a real mouse click can be aimed at them.
window.echoDashboard = {
  state,
  nodeAt(id) { const n = state.byId.get(id); return n ? toScreen(n.x, n.y) : null; },
  edgeAt(id) {
    const e = state.graph && state.graph.edges.find((x) => x.id === id);
    if (!e) return null;
    const a = toScreen(state.byId.get(e.source).x, state.byId.get(e.source).y);
    const b = toScreen(state.byId.get(e.target).x, state.byId.get(e.target).y);
    return [(a[0] + b[0]) / 2, (a[1] + b[1]) / 2];
  },
  hitAt(x, y) { return pick(x, y); },
  // A whole pixel (browsers report whole-pixel mouse positions) on an edge whose neighbours all hit that
  // edge, so a click there opens it rather than a node or another edge: the first such edge of a relation,
  // trying points from the middle of each edge outwards.
  clickableEdge(relation) {
    const steady = (e, p) => {
      for (const dx of [-1, 0, 1]) for (const dy of [-1, 0, 1]) {
        const hit = pick(p[0] + dx, p[1] + dy);
        if (!hit || hit.kind !== 'edge' || hit.id !== e.id) return false;
      }
      return true;
    };
    for (const e of (state.graph ? state.graph.edges : [])) {
      if (relation && e.relation !== relation) continue;
      const a = toScreen(state.byId.get(e.source).x, state.byId.get(e.source).y);
      const b = toScreen(state.byId.get(e.target).x, state.byId.get(e.target).y);
      for (const u of [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8]) {
        const p = [Math.round(a[0] + u * (b[0] - a[0])), Math.round(a[1] + u * (b[1] - a[1]))];
        if (steady(e, p)) return [e.id, p];
      }
    }
    return null;
  },
  clusterAt(id) { const c = state.graph && state.graph.clusters.find((x) => x.id === id); return c ? toScreen(c.x, c.y) : null; },
};

async function boot() {
  // ?scope=NAME (repeatable) on the page's URL opens it on those scopes; otherwise every readable one.
  const asked = new URLSearchParams(location.search).getAll('scope');
  if (asked.length) state.filters.scope = asked;
  wire();
  try {
    await enter();
    await loadGraph();
  } catch (err) {
    status(err.message, true);
    return;
  }
  if (SNAPSHOT) {
    // Its filters are the ones it was taken with: a snapshot cannot ask for other data.
    for (const c of document.querySelectorAll('#left input, #left select, #left button')) c.disabled = true;
    status(`snapshot taken ${t(SNAPSHOT.taken_at)}, as of ${t(SNAPSHOT.graph.as_of)}`);
  }
  loadRecallCost();
  loadHealth();
}

boot();
