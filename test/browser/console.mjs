// Drives the operator console (/ui) in Debian's Chromium with playwright-core. Run by
// test/e2e/console_test.go (the mesh scenario) and test/e2e/console_scale_test.go (first paint
// at scale); it prints one line "RESULT {json}" and exits 0, or prints why and exits 1.
//
// Environment:
//   MODE            mesh (default) or scale
//   CONSOLE_URL     the gateway whose /ui is opened
//   ADMIN_KEY       the admin key ("" when the gateway has none)
//   SHOT_DIR        where screenshots go
//   mesh:  DISABLE_WORKER (id), FAILOVER_WORKER (id), OWNER_ID and OWNER_PID (the gateway killed)
//   scale: PEERS, WORKERS (what the page must show)
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const env = process.env;
const base = env.CONSOLE_URL;
const key = env.ADMIN_KEY || '';
const shots = env.SHOT_DIR || tmpdir();
const result = {};
const userDir = mkdtempSync(join(tmpdir(), 'meshgw-chromium-'));
mkdirSync(shots, { recursive: true });

function fail(msg) { throw new Error(msg); }

async function admin(method, path, body) {
  const resp = await fetch(base + path, { method, headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined });
  const text = await resp.text();
  if (!resp.ok) fail(`${method} ${path}: ${resp.status} ${text}`);
  return text;
}

// rowText is the text of the worker row with that id, or null while it is not in the DOM.
const rowText = (page, id) => page.evaluate((id) => {
  const r = [...document.querySelectorAll('#workers-grid .row')].find((d) => d.dataset.id === id);
  return r ? r.textContent : null;
}, id);

async function search(page, text) {
  await page.fill('#search', text);
  await page.waitForFunction((id) => [...document.querySelectorAll('#workers-grid .row')].some((d) => d.dataset.id === id), text, { timeout: 5000 });
}

async function mesh(page) {
  // 1. No key yet: the login form, no data.
  await page.goto(base + '/ui', { waitUntil: 'domcontentloaded' });
  await page.waitForSelector('#login:not([hidden])', { timeout: 5000 });
  // 2. A wrong key: the login again, with the refusal, and still no data.
  await page.fill('#key', 'not-the-key');
  await page.click('#login button[type=submit]');
  await page.waitForFunction(() => document.getElementById('login-error').textContent.includes('refused'), null, { timeout: 5000 });
  const leaked = await page.evaluate(() => ({ main: !document.getElementById('main').hidden, rows: document.querySelectorAll('#workers-grid .row').length,
    peers: document.querySelectorAll('#peers tbody tr').length, stored: sessionStorage.length, cookie: document.cookie }));
  if (leaked.main || leaked.rows || leaked.peers || leaked.stored || leaked.cookie) fail('a wrong key shows data or keeps the key: ' + JSON.stringify(leaked));
  result.wrong_key = 'login shown again, no data';
  await page.screenshot({ path: join(shots, 'console-login.png') });

  // 3. The right key: the data; the key only in sessionStorage, never in a URL or a cookie.
  await page.fill('#key', key);
  await page.click('#login button[type=submit]');
  await page.waitForSelector('body[data-painted="1"]', { timeout: 10000 });
  const where = await page.evaluate((k) => ({ url: location.href.includes(k), cookie: document.cookie, session: sessionStorage.getItem('meshgw-admin-key') === k,
    local: localStorage.length }), key);
  if (where.url || where.cookie || !where.session || where.local) fail('the key is kept wrong: ' + JSON.stringify(where));
  await search(page, env.DISABLE_WORKER);
  const before = await rowText(page, env.DISABLE_WORKER);
  if (!before.includes('routable')) fail('worker row before the disable: ' + before);

  // 4. Disable through the admin API; the page shows it.
  const sent = Date.now();
  await admin('PUT', '/workers/' + encodeURIComponent(env.DISABLE_WORKER), { disabled: true });
  const answered = Date.now();
  await page.waitForFunction((id) => {
    const r = [...document.querySelectorAll('#workers-grid .row')].find((d) => d.dataset.id === id);
    return r && r.textContent.includes('disabled');
  }, env.DISABLE_WORKER, { timeout: 5000, polling: 'raf' });
  const shown = Date.now();
  result.disable_ms_from_request = shown - sent;
  result.disable_ms_from_answer = shown - answered;
  result.disable_api_ms = answered - sent;
  await page.waitForFunction((id) => [...document.querySelectorAll('#transitions li')].some((li) => li.textContent.includes(id + ' left routing: disabled')),
    env.DISABLE_WORKER, { timeout: 5000 });

  // 5. Kill the owner of another worker: the page shows the failover.
  await search(page, env.FAILOVER_WORKER);
  process.kill(Number(env.OWNER_PID), 'SIGKILL');
  const killed = Date.now();
  await page.waitForFunction(([id, owner]) => {
    const failover = [...document.querySelectorAll('#transitions li')].some((li) => li.dataset.kind === 'failover' && li.textContent.includes(id + ': owner ' + owner));
    const r = [...document.querySelectorAll('#workers-grid .row')].find((d) => d.dataset.id === id);
    return failover && r && !r.children[4].textContent.includes(owner);
  }, [env.FAILOVER_WORKER, env.OWNER_ID], { timeout: 40000 });
  result.failover_shown_ms = Date.now() - killed;
  const peer = await page.evaluate((owner) => {
    const tr = [...document.querySelectorAll('#peers tbody tr')].find((r) => r.dataset.id === owner);
    return tr ? tr.textContent : null;
  }, env.OWNER_ID);
  result.killed_peer_row = peer;
  await page.fill('#search', '');
  await page.waitForTimeout(300); // the search's debounce, before the screenshot
  await page.screenshot({ path: join(shots, 'console.png'), fullPage: true });
}

async function scale(page) {
  // With a key, it goes in before the page loads, as a signed-in tab has it; without one (the
  // gateway trusts loopback) the page must open with no login.
  await page.addInitScript((k) => { if (k) sessionStorage.setItem('meshgw-admin-key', k); }, key);
  // A cold load first (the browser's own start-up), then three measured ones, as an operator's
  // open browser loads the page; the median is the figure (the machine is shared).
  await page.goto(base + '/ui', { waitUntil: 'domcontentloaded' });
  await page.waitForSelector('body[data-painted="1"]', { timeout: 15000 });
  result.cold_first_paint_ms = await page.evaluate(() => Math.round(performance.getEntriesByName('console-first-paint')[0].startTime));
  if (!key && await page.evaluate(() => !document.getElementById('login').hidden)) fail('the login form shows on a gateway without a key');
  const runs = [];
  for (let i = 0; i < 3; i++) {
    await page.reload({ waitUntil: 'domcontentloaded' });
    await page.waitForSelector('body[data-painted="1"]', { timeout: 15000 });
    runs.push(await page.evaluate(() => {
      const at = (n) => { const e = performance.getEntriesByName(n)[0]; return e ? Math.round(e.startTime) : null; };
      return { first_paint: at('console-first-paint'), dom: Math.round(performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd),
        data_requested: at('console-data-requested'), data_parsed: at('console-data-parsed'), render_start: at('console-render-start'),
        render_end: at('console-render-end') };
    }));
  }
  result.runs = runs;
  const paints = runs.map((r) => r.first_paint).sort((a, b) => a - b);
  result.first_paint_ms = paints[1]; // the median
  result.best_first_paint_ms = paints[0];
  const m = await page.evaluate(() => ({ rows_in_dom: document.querySelectorAll('#workers-grid .row').length,
    count: document.getElementById('workers-count').textContent, peers_rows: document.querySelectorAll('#peers tbody tr').length }));
  Object.assign(result, m);
  if (!m.count.includes('of ' + env.WORKERS)) fail('the page does not count every worker: ' + m.count);
  if (m.peers_rows !== Number(env.PEERS)) fail('peers shown: ' + m.peers_rows);
  // Scrolling to the end keeps the DOM small.
  const t0 = Date.now();
  await page.focus('#workers-grid');
  await page.keyboard.press('End');
  await page.waitForFunction(() => document.querySelector('#workers-grid .row.active') !== null, null, { timeout: 5000 });
  result.end_key_ms = Date.now() - t0;
  // Keyboard: End reaches the last row, ArrowUp moves one up.
  const pos = () => page.evaluate(() => {
    const g = document.getElementById('workers-grid'), a = g.querySelector('.row.active');
    return [Number(a.getAttribute('aria-rowindex')), Number(g.getAttribute('aria-rowcount'))];
  });
  const [endAt, count] = await pos();
  await page.keyboard.press('ArrowUp');
  const [upAt] = await pos();
  if (endAt !== count || upAt !== count - 1) fail(`keyboard: End at row ${endAt} of ${count}, then ArrowUp at ${upAt}`);
  result.rows_in_dom_at_end = await page.evaluate(() => document.querySelectorAll('#workers-grid .row').length);
  await page.screenshot({ path: join(shots, 'console-scale.png') });
}

let browser;
try {
  // A fresh profile each run (launchPersistentContext passes it as --user-data-dir).
  browser = await chromium.launchPersistentContext(userDir, {
    executablePath: env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
    viewport: { width: 1400, height: 1000 },
    timeout: 30000,
  });
  const page = browser.pages()[0] || await browser.newPage();
  page.on('pageerror', (e) => { console.log('page error: ' + e.message); result.page_errors = (result.page_errors || 0) + 1; });
  if ((env.MODE || 'mesh') === 'scale') await scale(page); else await mesh(page);
  console.log('RESULT ' + JSON.stringify(result));
} catch (e) {
  console.log('FAIL ' + (e && e.stack ? e.stack : e));
  console.log('RESULT ' + JSON.stringify(result));
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
  rmSync(userDir, { recursive: true, force: true });
}
