// The operator console: a read-only, live view of the mesh (DESIGN.md section 19). The admin
// key, when the gateway asks for one, lives in this tab's sessionStorage only.
import { snapshot, stream, AuthError } from '/ui/stream.js';
import { Grid } from '/ui/grid.js';

const KEY = 'meshgw-admin-key';
const $ = (id) => document.getElementById(id);

const st = { v: 0, node: '', peers: new Map(), workers: new Map(), journal: [], transitions: [] };
let abort = null, painted = false, frame = 0, dirtyWorkers = true;

// ---- connection and login ----

function showLogin(message) {
  clear();
  $('main').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('logout').hidden = true;
  $('conn').textContent = 'Signed out';
  $('key').focus();
}

function clear() {
  st.v = 0; st.peers.clear(); st.workers.clear(); st.journal = []; st.transitions = [];
  dirtyWorkers = true;
}

async function connect(key) {
  if (abort) abort.abort();
  const mine = abort = new AbortController();
  let wait = 500;
  while (!mine.signal.aborted) {
    try {
      $('conn').textContent = 'Connecting…';
      // The first state comes as one JSON document (the browser parses it as it arrives), then
      // the stream from its version on.
      if (!st.v) {
        if (!painted) performance.mark('console-data-requested');
        onEvent('snapshot', await snapshot(key, mine.signal));
      }
      await stream(key, st.v, (name, data) => { wait = 500; onEvent(name, JSON.parse(data)); }, mine.signal);
      if (mine.signal.aborted) return;
      $('conn').textContent = '⚠ Stream ended — reconnecting';
    } catch (e) {
      if (mine.signal.aborted) return;
      if (e instanceof AuthError) {
        if (e.status === 401) {
          sessionStorage.removeItem(KEY);
          showLogin(key ? '✖ That key was refused: ' + e.message : '');
        } else {
          clear(); $('main').hidden = true;
          $('conn').textContent = '✖ Refused: ' + e.message;
        }
        return;
      }
      $('conn').textContent = '⚠ Disconnected (' + e.message + ') — reconnecting in ' + (wait / 1000) + ' s';
    }
    await new Promise((r) => setTimeout(r, wait));
    wait = Math.min(wait * 2, 8000);
  }
}

$('login-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const key = $('key').value.trim();
  $('key').value = '';
  if (!key) return;
  sessionStorage.setItem(KEY, key);
  $('login').hidden = true;
  connect(key);
});

$('logout').addEventListener('click', () => {
  sessionStorage.removeItem(KEY);
  if (abort) abort.abort();
  showLogin('');
});

// ---- events ----

function onEvent(name, m) {
  if (!painted) performance.mark('console-data-parsed');
  if (name === 'snapshot') {
    clear();
    st.v = m.v; st.node = m.node; st.journal = m.journal || [];
    for (const p of m.peers) st.peers.set(p.id, p);
    for (const w of m.workers) st.workers.set(w.id, w);
    st.transitions = (m.transitions || []).slice();
  } else if (name === 'delta') {
    if (m.v <= st.v) return;
    st.v = m.v;
    for (const p of m.peers || []) st.peers.set(p.id, p);
    for (const id of m.peers_gone || []) st.peers.delete(id);
    for (const w of m.workers || []) st.workers.set(w.id, w);
    for (const id of m.workers_gone || []) st.workers.delete(id);
    if (m.journal) st.journal = m.journal;
    if (m.transitions) st.transitions.push(...m.transitions);
    if (st.transitions.length > 200) st.transitions.splice(0, st.transitions.length - 200);
    if (m.workers || m.workers_gone) dirtyWorkers = true;
  } else {
    return;
  }
  const key = sessionStorage.getItem(KEY);
  $('logout').hidden = !key;
  $('login').hidden = true;
  $('main').hidden = false;
  $('conn').textContent = '● Live from ' + st.node + ' · updated ' + new Date().toLocaleTimeString();
  document.body.dataset.version = String(st.v);
  if (name === 'snapshot') { dirtyWorkers = true; render(); } else schedule();
}

function schedule() {
  if (frame) return;
  frame = requestAnimationFrame(() => { frame = 0; render(); });
}

// ---- rendering ----

const ICON = {
  alive: '✔', suspect: '▲', dead: '✖', left: '⏏', foreign: '≠',
  ready: '✔', pending: '…', not_ready: '▲', failed: '✖', draining: '⧗', unknown: '?',
  closed: '✔', open: '⚡', half_open: '◐',
};
const CLS = { alive: 'ok', ready: 'ok', closed: 'ok', dead: 'bad', failed: 'bad', open: 'bad', suspect: 'warn', not_ready: 'warn', half_open: 'warn', draining: 'warn', pending: 'warn' };
const label = (s) => (ICON[s] ? ICON[s] + ' ' : '') + (s || '—');

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function render() {
  if (!painted) performance.mark('console-render-start');
  renderSummary();
  renderPeers();
  renderTransitions();
  renderJournal();
  if (dirtyWorkers) renderWorkers();
  else grid.render();
  if (!painted) {
    performance.mark('console-render-end');
    painted = true;
    // The frame after the render is painted before the timeout's task runs: the mark is when the
    // data is on the screen.
    requestAnimationFrame(() => setTimeout(() => { performance.mark('console-first-paint'); document.body.dataset.painted = '1'; }, 0));
  }
}

function renderSummary() {
  let alive = 0, leader = '';
  for (const p of st.peers.values()) { if (p.status === 'alive') alive++; if (p.raft === 'leader') leader = p.id; }
  let out = 0, disabled = 0;
  for (const w of st.workers.values()) { if (!w.routable) out++; if (w.disabled) disabled++; }
  const items = [['Gateway', st.node], ['Raft leader', leader ? '★ ' + leader : '✖ none'], ['Peers alive', alive + ' of ' + st.peers.size],
    ['Workers', String(st.workers.size)], ['Not routable', String(out)], ['Disabled', String(disabled)],
    ['Open journal records', String(st.journal.length)]];
  const dl = $('summary');
  dl.replaceChildren(...items.map(([k, v]) => { const d = el('div'); d.append(el('dt', k), el('dd', v)); return d; }));
}

function renderPeers() {
  const rows = [...st.peers.values()].sort((a, b) => (a.id < b.id ? -1 : (a.id > b.id ? 1 : 0)));
  $('peers-count').textContent = '(' + rows.length + ')';
  const frag = document.createDocumentFragment();
  for (const p of rows) {
    const tr = el('tr');
    tr.dataset.id = p.id;
    const th = el('th', p.id + (p.self ? ' (this gateway)' : '') + (p.draining ? ' ⧗ draining' : ''));
    th.scope = 'row';
    tr.append(th, el('td', label(p.status), CLS[p.status]), el('td', p.raft === 'leader' ? '★ leader' : (p.raft || '—')),
      el('td', p.region || '—'), el('td', p.color || '—'), el('td', String(p.applied_index), 'num'), el('td', String(p.owned), 'num'));
    frag.append(tr);
  }
  $('peers').tBodies[0].replaceChildren(frag);
}

const KIND = { routing: '⇄', failover: '⚠', handoff: '→', leader: '★', peer: '◆', worker: '•', health: '♥', breaker: '⚡' };

function renderTransitions() {
  const frag = document.createDocumentFragment();
  for (let i = st.transitions.length - 1; i >= 0; i--) {
    const t = st.transitions[i], li = el('li');
    li.dataset.kind = t.kind;
    const at = new Date(t.at), time = el('time', at.toLocaleTimeString());
    time.dateTime = t.at;
    time.title = t.at;
    li.append(time, el('span', (KIND[t.kind] || '•') + ' ' + t.kind + ': ', t.kind === 'failover' ? 'bad' : ''), el('span', t.text));
    frag.append(li);
  }
  if (!st.transitions.length) frag.append(el('li', 'No transition seen yet.'));
  $('transitions').replaceChildren(frag);
}

function renderJournal() {
  const box = $('journal');
  if (!st.journal.length) { box.replaceChildren(el('p', '✔ No open weight-update record.')); return; }
  const ul = el('ul');
  for (const j of st.journal) {
    const done = Object.keys(j.outcomes || {}).length;
    ul.append(el('li', '⚠ ' + j.id + ' — ' + j.status + ', coordinator ' + j.coordinator + ', started ' + new Date(j.started_at).toLocaleString() +
      ', ' + done + ' of ' + j.targets + ' targets answered'));
  }
  box.replaceChildren(ul);
}

// ---- workers ----

const firstModel = (w) => (w.models ? w.models.split(',')[0] : '(any model)');
const groupOf = { owner: (w) => w.owner || '(no owner)', region: (w) => w.region || '(no region)', model: firstModel, none: () => '' };
const filters = {
  all: () => true, out: (w) => !w.routable, in: (w) => w.routable, disabled: (w) => w.disabled,
  unhealthy: (w) => w.health !== 'ready', open: (w) => w.breaker !== 'closed' && w.breaker !== 'unknown', stale: (w) => w.stale,
};

function renderWorkers() {
  dirtyWorkers = false;
  const g = $('group').value, f = filters[$('filter').value] || filters.all;
  const q = $('search').value.trim().toLowerCase();
  const by = groupOf[g] || groupOf.none;
  // Bucketed by group in one pass; the rows come sorted by id (the snapshot is), so a group is
  // sorted only when a delta added a worker out of order: no sort of 10,000 rows.
  const groups = new Map();
  let shown = 0;
  for (const w of st.workers.values()) {
    if (!f(w)) continue;
    if (q && !(w.id.toLowerCase().includes(q) || w.url.toLowerCase().includes(q) || w.owner.toLowerCase().includes(q) ||
      (w.region || '').toLowerCase().includes(q) || (w.models || '').toLowerCase().includes(q))) continue;
    const name = by(w);
    let b = groups.get(name);
    if (!b) groups.set(name, (b = []));
    b.push(w);
    shown++;
  }
  const byID = (a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  const items = [];
  for (const name of [...groups.keys()].sort()) {
    const list = groups.get(name);
    for (let i = 1; i < list.length; i++) if (list[i - 1].id > list[i].id) { list.sort(byID); break; }
    if (g !== 'none') {
      let out = 0;
      for (const w of list) if (!w.routable) out++;
      items.push({ key: 'g:' + name, group: g + ' ' + name, n: list.length, out });
    }
    for (const w of list) items.push({ key: 'w:' + w.id, w });
  }
  $('workers-count').textContent = '(' + shown + ' shown of ' + st.workers.size + ')';
  grid.setItems(items);
}

function renderRow(item, d) {
  d.dataset.id = item.w ? item.w.id : '';
  if (!item.w) {
    d.className = 'row group';
    d.textContent = item.group + ' — ' + item.n + ' worker' + (item.n === 1 ? '' : 's') + (item.out ? ', ✖ ' + item.out + ' not routable' : ', ✔ all routable');
    return;
  }
  const w = item.w;
  d.className = 'row';
  const routing = w.disabled ? '✖ disabled' : (w.dead ? '✖ dead' : (w.routable ? '✔ routable' : '✖ out'));
  const cells = [
    [w.id + (w.stale ? ' (stale)' : ''), ''], [routing, w.routable ? 'ok' : 'bad'], [label(w.health), CLS[w.health] || ''],
    [label(w.breaker), CLS[w.breaker] || ''], [w.owner || '—', ''], [w.region || '—', ''], [w.models || '(any)', ''],
    [w.hit >= 0 ? (w.hit * 100).toFixed(1) + ' %' : '—', 'num'],
  ];
  if (d.childElementCount !== cells.length) d.replaceChildren(...cells.map(() => el('span')));
  cells.forEach(([text, cls], i) => {
    const s = d.children[i];
    s.textContent = text; s.className = cls; s.setAttribute('role', 'gridcell');
  });
  d.children[0].title = w.url;
}

function showDetail(item) {
  const box = $('detail');
  if (!item || !item.w) { box.textContent = item ? item.group : ''; return; }
  const w = item.w;
  box.textContent = w.id + ' · ' + w.url + ' · owner ' + (w.owner || '—') + ' · region ' + (w.region || '—') + ' · ' +
    (w.routable ? 'routable' : 'not routable') + (w.disabled ? ' (disabled' + (w.reason ? ': ' + w.reason : '') + ')' : '') +
    ' · health ' + w.health + ' · breaker ' + w.breaker + ' · ' + w.active + ' in flight here · cache hit ' +
    (w.hit >= 0 ? (w.hit * 100).toFixed(1) + ' %' : 'not reported yet') + (w.stale ? ' · owner\'s state is stale' : '');
}

const grid = new Grid($('workers-grid'), 26, renderRow, showDetail);
let searchTimer = 0;
$('search').addEventListener('input', () => { clearTimeout(searchTimer); searchTimer = setTimeout(renderWorkers, 80); });
$('group').addEventListener('change', renderWorkers);
$('filter').addEventListener('change', renderWorkers);

connect(sessionStorage.getItem(KEY) || '');
