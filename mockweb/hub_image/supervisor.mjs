// The hub's front door (shinken's own code, not part of CUA-Gym-Hub): one HTTP server that
// routes each request to the mock app it names and starts that app's `vite preview` (with the
// app's own state middleware) on first use, so a hub holding many apps costs memory only for
// the apps a run touches.
//
// Routing: port 80 by Host header (`cua-gym-gmail`, the network alias forks resolve), and one
// direct port per app (8000 + its index, as deploy-all.sh numbers them) for `shinken hub up
// --publish`. /__shinken/health lists the apps; /__shinken/start?app=NAME starts one and
// answers when it serves.
import http from 'node:http';
import net from 'node:net';
import fs from 'node:fs';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';

const MANIFEST = process.env.SHINKEN_HUB_MANIFEST || '/hub/hub.json';
const START_TIMEOUT_MS = Number(process.env.SHINKEN_HUB_START_TIMEOUT_MS || 120000);
const INTERNAL_BASE = 20000;
// The State API's writes that reset or replace a rollout's state (`set`, `reset`, any action but the
// page's own `set_current` save) need the rollout's key: HMAC-SHA256(SHINKEN_HUB_KEY, sid), which
// shinken computes outside the sandbox and hands only to its own commands. A rollout's sid is sealed
// (a fork's `shk-` sid, or one shinken sealed with a file in SEALED_DIR); other sids (a setup's own
// while the golden is built, `hub check`'s) are unchanged. docs/integrity.md.
const HUB_KEY = process.env.SHINKEN_HUB_KEY || '';
const SEALED_DIR = '/hub/.shinken-sealed';
const MAX_STATE_BODY = 256 * 1024 * 1024;
const LOOPBACK_ONLY = process.env.SHINKEN_HUB_LOOPBACK_ONLY || '/hub/loopback_only.cjs';
if (!fs.existsSync(LOOPBACK_ONLY)) throw new Error(`${LOOPBACK_ONLY} is missing: the apps' ports would answer the hub's networks`);
const manifest = JSON.parse(fs.readFileSync(MANIFEST, 'utf8'));

const apps = manifest.apps.map((a, i) => ({
  ...a, internal: INTERNAL_BASE + i, addr: '127.0.0.1', proc: null, ready: null, starts: 0, lastError: null,
}));
const byAlias = new Map(apps.map((a) => [a.alias, a]));
const byName = new Map(apps.map((a) => [a.name.toLowerCase(), a]));

function log(msg) { process.stdout.write(`[hub] ${new Date().toISOString()} ${msg}\n`); }

function portOpenAt(host, port) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

// The loopback address an app answers on: IPv4 first, else IPv6 (an app that binds one family
// whatever it is told still serves through the hub; `shinken hub check` reports it).
async function portOpen(app) {
  for (const host of ['127.0.0.1', '::1']) {
    if (await portOpenAt(host, app.internal)) { app.addr = host; return true; }
  }
  return false;
}

// Apps bind both loopback families (`::` is dual-stack) when the container has IPv6 on its
// loopback (the hub is started with it enabled), else IPv4 only.
function ipv6Loopback() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(0, '::1', () => s.close(() => resolve(true)));
  });
}
const APP_HOST = (await ipv6Loopback()) ? '::' : '127.0.0.1';

// The package.json script `name` when `npm run name` would only run it (no pre/post hook).
function directScript(dir, name) {
  try {
    const scripts = JSON.parse(fs.readFileSync(`${dir}/package.json`, 'utf8')).scripts || {};
    const script = scripts[name];
    if (typeof script !== 'string' || !script.trim() || scripts[`pre${name}`] || scripts[`post${name}`]) return null;
    return script;
  } catch {
    return null;
  }
}

function start(app) {
  if (app.ready) return app.ready;
  app.starts += 1;
  // The app's own preview script, as deploy-all.sh runs it, on both address families. Its port
  // answers only the hub's own loopback (LOOPBACK_ONLY, preloaded into every node process the app
  // starts): from a fork, the State API is reached only through the front door, which asks a
  // rollout's key for whole-state writes.
  const args = ['--host', APP_HOST, '--port', String(app.internal), '--strictPort'];
  const script = directScript(app.dir, 'preview');
  const nodeOptions = `${process.env.NODE_OPTIONS || ''} --require ${LOOPBACK_ONLY}`.trim();
  const env = { ...process.env, BROWSER: 'none', NODE_OPTIONS: nodeOptions };
  // What `npm run preview -- ARGS` runs, without starting npm (seconds under load) when npm
  // would only run the script: sh -c with node_modules/.bin on PATH and the arguments appended.
  const proc = script
    ? spawn('sh', ['-c', `${script} "$@"`, 'sh', ...args], { cwd: app.dir, stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...env, PATH: `${app.dir}/node_modules/.bin:${env.PATH || '/usr/bin:/bin'}`, npm_lifecycle_event: 'preview' } })
    : spawn('npm', ['run', 'preview', '--', ...args], { cwd: app.dir, stdio: ['ignore', 'pipe', 'pipe'], env });
  app.proc = proc;
  const tag = `[${app.name}] `;
  for (const stream of [proc.stdout, proc.stderr]) {
    stream.on('data', (d) => process.stdout.write(d.toString().split('\n').filter(Boolean).map((l) => tag + l + '\n').join('')));
  }
  let exited = false;
  proc.on('exit', (code, signal) => {
    exited = true;
    app.lastError = `vite preview exited (code ${code}, signal ${signal})`;
    log(`${app.name}: ${app.lastError}`);
    if (app.proc === proc) { app.proc = null; app.ready = null; }
  });
  const t0 = Date.now();
  app.ready = (async () => {
    while (Date.now() - t0 < START_TIMEOUT_MS) {
      if (exited) throw new Error(app.lastError);
      if (await portOpen(app)) {
        log(`${app.name}: serving on ${app.addr} after ${Date.now() - t0} ms`);
        return true;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    proc.kill('SIGKILL');
    throw new Error(`vite preview did not listen within ${START_TIMEOUT_MS} ms`);
  })();
  app.ready.catch((e) => { app.lastError = String(e.message || e); if (app.proc === proc) app.ready = null; });
  return app.ready;
}

function sendJson(res, status, doc) {
  const body = JSON.stringify(doc);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
  res.end(body);
}

function health() {
  return {
    ok: true,
    // What this front door holds of a rollout's state (mockweb/hub.py GUARDS: a hub without them is refused).
    guards: ['rollout_key', 'apps_loopback_only'],
    app_host: APP_HOST,
    apps: apps.map((a) => ({ name: a.name, alias: a.alias, port: a.port, internal: a.internal, addr: a.addr,
      running: !!a.proc, starts: a.starts, last_error: a.lastError })),
  };
}

const cleanSid = (sid) => String(sid || '').replace(/[^a-zA-Z0-9_-]/g, '');

// Every sid a mock could read from this query: mocks parse it their own way (first or last of
// repeated names, their own decoding), so every candidate counts.
function sidsOf(rawUrl) {
  const q = rawUrl.includes('?') ? rawUrl.slice(rawUrl.indexOf('?') + 1) : '';
  const out = new URLSearchParams(q).getAll('sid');
  for (const pair of q.split('&')) {
    const [k, v] = pair.split('=');
    try { if (decodeURIComponent(k || '') === 'sid') out.push(decodeURIComponent(v || '')); } catch { out.push(v || ''); }
  }
  return out.map(cleanSid);
}

const sealed = (sid) => sid.startsWith('shk-') || (sid !== '' && fs.existsSync(`${SEALED_DIR}/${sid}`));

function keyFor(sid) {
  return crypto.createHmac('sha256', HUB_KEY).update(sid).digest('hex');
}

function hasKey(req, sids) {
  const got = Buffer.from(String(req.headers['x-shinken-state-key'] || ''));
  return HUB_KEY !== '' && sids.every((sid) => {
    const want = Buffer.from(keyFor(sid));
    return got.length === want.length && crypto.timingSafeEqual(got, want);
  });
}

// A POST the mock's state middleware (connect: a case-insensitive prefix match on /post) takes.
function isStateWrite(req) {
  const path = (req.url || '/').split('?')[0].toLowerCase();
  let decoded = path;
  try { decoded = decodeURIComponent(path); } catch { /* the raw path decides */ }
  return req.method === 'POST' && (path.startsWith('/post') || decoded.startsWith('/post'));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_STATE_BODY) { reject(new Error('state body too large')); req.destroy(); return; }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

// null: forward as it came; a Buffer: the body read here, forwarded after the check passed.
async function gateStateWrite(req, res) {
  if (!isStateWrite(req)) return null;
  const sids = sidsOf(req.url || '/').filter(sealed);
  // Not a rollout's state, or the rollout's key: forwarded as it comes (in its own pieces).
  if (sids.length === 0 || hasKey(req, sids)) return null;
  let body;
  try {
    body = await readBody(req);
  } catch (e) {
    sendJson(res, 413, { error: `shinken: ${e.message}` });
    return false;
  }
  let action = 'set';
  try {
    const doc = JSON.parse(body.toString('utf8'));
    action = (doc && doc.action) || 'set';
  } catch { /* not JSON: the mock answers it; an unknown action is checked like a write */ }
  if (action === 'set_current') return body;
  log(`refused ${JSON.stringify(action)} on sealed sid(s) ${sids.join(',')}: no rollout key`);
  sendJson(res, 403, { error: `shinken: the State API's ${JSON.stringify(action)} on this rollout's state needs the `
    + 'rollout key, which only shinken holds; the app saves its own state with set_current' });
  return false;
}

async function proxy(app, req, res) {
  const body = await gateStateWrite(req, res);
  if (body === false) return;
  try {
    await start(app);
  } catch (e) {
    sendJson(res, 502, { error: `mock app ${app.name} failed to start: ${e.message || e}` });
    return;
  }
  const hostPort = app.addr.includes(':') ? `[${app.addr}]:${app.internal}` : `${app.addr}:${app.internal}`;
  const headers = { ...req.headers, host: hostPort, 'x-forwarded-host': req.headers.host || '' };
  delete headers['x-shinken-state-key'];  // checked here; the mock never sees it
  if (body) {
    headers['content-length'] = String(body.length);
    delete headers['transfer-encoding'];
  }
  const up = http.request({ host: app.addr, port: app.internal, method: req.method, path: req.url, headers }, (r) => {
    res.writeHead(r.statusCode || 502, r.headers);
    r.pipe(res);
  });
  up.on('error', (e) => {
    if (!res.headersSent) sendJson(res, 502, { error: `mock app ${app.name}: ${e.message}` });
    else res.destroy();
  });
  if (body) up.end(body);
  else req.pipe(up);
}

async function control(req, res, url) {
  if (url.pathname === '/__shinken/health') return sendJson(res, 200, health());
  if (url.pathname === '/__shinken/start') {
    const app = byName.get((url.searchParams.get('app') || '').toLowerCase());
    if (!app) return sendJson(res, 404, { error: 'unknown app', apps: apps.map((a) => a.name) });
    try {
      const t0 = Date.now();
      await start(app);
      return sendJson(res, 200, { app: app.name, ready_ms: Date.now() - t0 });
    } catch (e) {
      return sendJson(res, 502, { app: app.name, error: String(e.message || e) });
    }
  }
  return sendJson(res, 404, { error: 'unknown control path' });
}

function handler(fixed) {
  return (req, res) => {
    const url = new URL(req.url || '/', 'http://hub');
    if (url.pathname.startsWith('/__shinken/')) return void control(req, res, url);
    const host = (req.headers.host || '').split(':')[0].toLowerCase();
    const app = fixed || byAlias.get(host);
    if (!app) {
      return sendJson(res, 404, { error: `no mock app answers to host ${JSON.stringify(host)}`, hosts: apps.map((a) => a.alias) });
    }
    void proxy(app, req, res);
  };
}

// No host: Node listens on `::` (both families) when the container has IPv6, else 0.0.0.0.
const servers = [http.createServer(handler(null)).listen(80)];
for (const app of apps) servers.push(http.createServer(handler(app)).listen(app.port));
for (const s of servers) s.keepAliveTimeout = 65000;
log(`serving ${apps.length} app(s): ${apps.map((a) => `${a.alias}:${a.port}`).join(' ')}`);
if (process.env.SHINKEN_HUB_EAGER === '1') for (const a of apps) start(a).catch(() => {});

function stop() {
  for (const a of apps) if (a.proc) a.proc.kill('SIGTERM');
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
