// `shinken hub check`, run inside a hub container with its node (shinken's own code, not part
// of CUA-Gym-Hub): what one mock app's State API does on fresh sids, the way setups (`set`),
// pages (`set_current`) and rewards (`GET /go`) use it. Argument: one JSON object
// {app, port, internal, sids: [5 fresh sids]}; prints one JSON object {app, results, ms}.
// `port` is the app's direct port on the hub's supervisor (the route forks take by host name),
// `internal` the port of the app's own `vite preview`.
//
// Every check changes only keys of its own (`shinken_probe*`) on top of the app's default
// state, and compares only those, so a mock that adds its own defaults to what it stores
// still passes.
import crypto from 'node:crypto';
import http from 'node:http';

const arg = JSON.parse(process.argv[process.argv.length - 1]);
const TIMEOUT_MS = 60000;
const base = `http://127.0.0.1:${arg.port}`;
const t0 = Date.now();

async function call(url, init = {}) {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(TIMEOUT_MS) });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, bytes };
}

async function go(sid, at = base) {
  const { status, bytes } = await call(`${at}/go?sid=${encodeURIComponent(sid)}`);
  let doc = null;
  try { doc = JSON.parse(bytes.toString('utf8')); } catch { /* judged below */ }
  if (status !== 200 || doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
    throw new Error(`GET /go answered ${status}: ${bytes.toString('utf8').slice(0, 160)}`);
  }
  return doc;
}

// The check's sids are rollout sids (shk-): the front door asks their key of `set` and `reset`,
// which this operator's command derives from the hub's own secret (its environment).
const stateKey = (sid) => crypto.createHmac('sha256', process.env.SHINKEN_HUB_KEY || '').update(sid).digest('hex');

async function post(sid, body) {
  const { status, bytes } = await call(`${base}/post?sid=${encodeURIComponent(sid)}`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-shinken-state-key': stateKey(sid) },
    body: JSON.stringify(body),
  });
  if (status !== 200) throw new Error(`POST /post (${body.action}) answered ${status}: ${bytes.toString('utf8').slice(0, 160)}`);
}

const canon = (v) => JSON.stringify(v, (k, x) => (x && typeof x === 'object' && !Array.isArray(x)
  ? Object.fromEntries(Object.keys(x).sort().map((key) => [key, x[key]])) : x));
const same = (a, b) => canon(a) === canon(b);
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

// An empty diff, whatever its shape: null, {}, [], or only empty parts ({added: {}, ...}).
function emptyDiff(d) {
  if (d === null || d === undefined) return true;
  if (Array.isArray(d)) return d.every(emptyDiff);
  if (isObj(d)) return Object.values(d).every(emptyDiff);
  return false;
}
const mentions = (diff, key) => JSON.stringify(diff ?? null).includes(key);
const pick = (state, key) => (isObj(state) ? state[key] : undefined);

function result(ok, fields, detail) { return { ok, fields: ok ? [] : fields, detail }; }
const ALL = ['state_diff', 'current_state', 'initial_state'];

// The app's default state, as a new sid reads it; {} when the app answers nothing for a sid
// it has not seen (a mock that keeps sessions in memory answers 404 until one is `set`).
async function defaults(sid) {
  try {
    const doc = await go(sid);
    return isObj(doc.current_state) ? doc.current_state : {};
  } catch {
    return {};
  }
}

// 1. An untouched sid has nothing to diff: neither one never posted to, nor one just `set`.
async function freshDiffEmpty([sid, sid2]) {
  let note = 'new sid and a just-set sid: state_diff empty';
  const { status, bytes } = await call(`${base}/go?sid=${encodeURIComponent(sid)}`);
  let doc = null;
  try { doc = JSON.parse(bytes.toString('utf8')); } catch { /* below */ }
  if (status === 200 && isObj(doc)) {
    if (!('state_diff' in doc)) return result(false, ['state_diff'], '/go of a new sid has no state_diff');
    if (!emptyDiff(doc.state_diff)) {
      return result(false, ['state_diff'], `a new sid's state_diff is not empty: ${JSON.stringify(doc.state_diff).slice(0, 160)}`);
    }
  } else if (status === 404 && isObj(doc)) {
    // No session until a setup posts one: what a reward reads comes after that `set`.
    note = `a new sid answers 404 (${bytes.toString('utf8').slice(0, 60)}) until set; a just-set sid: state_diff empty`;
  } else {
    return result(false, ALL, `GET /go of a new sid answered ${status}: ${bytes.toString('utf8').slice(0, 120)}`);
  }
  const start = { ...(await defaults(sid2)), shinken_probe: { counter: 1, label: 'start' } };
  await post(sid2, { action: 'set', state: start });
  const after = await go(sid2);
  if (!emptyDiff(after.state_diff)) {
    return result(false, ['state_diff'], `right after set, state_diff is not empty: ${JSON.stringify(after.state_diff).slice(0, 160)}`);
  }
  return result(true, [], note);
}

// 2. One change through set_current (what a page saves) shows up in /go.
async function changeShows(sid) {
  const start = { ...(await defaults(sid)), shinken_probe: { counter: 1, label: 'start' } };
  await post(sid, { action: 'set', state: start });
  const changed = { ...start, shinken_probe: { counter: 2, label: 'changed' } };
  await post(sid, { action: 'set_current', state: changed });
  const doc = await go(sid);
  const bad = [];
  const why = [];
  if (!same(pick(doc.current_state, 'shinken_probe'), changed.shinken_probe)) {
    bad.push('current_state'); why.push(`current_state.shinken_probe is ${JSON.stringify(pick(doc.current_state, 'shinken_probe'))}`);
  }
  if (!same(pick(doc.initial_state, 'shinken_probe'), start.shinken_probe)) {
    bad.push('initial_state'); why.push(`initial_state.shinken_probe is ${JSON.stringify(pick(doc.initial_state, 'shinken_probe'))} (the change went into it)`);
  }
  if (!('state_diff' in doc) || emptyDiff(doc.state_diff) || !mentions(doc.state_diff, 'shinken_probe')) {
    bad.push('state_diff'); why.push(`state_diff does not name the change: ${JSON.stringify(doc.state_diff ?? null).slice(0, 120)}`);
  }
  return bad.length ? result(false, bad, why.join('; ')) : result(true, [], 'set_current change shows in current_state and state_diff');
}

// 3. reset: the sid reads as its initial state (or the app's default) again, nothing to diff.
async function reset(sid) {
  const start = { ...(await defaults(sid)), shinken_probe: { counter: 1, label: 'start' } };
  await post(sid, { action: 'set', state: start });
  await post(sid, { action: 'set_current', state: { ...start, shinken_probe: { counter: 3, label: 'to be reset' } } });
  await post(sid, { action: 'reset' });
  const doc = await go(sid);
  const probe = pick(doc.current_state, 'shinken_probe');
  const bad = [];
  const why = [];
  if (probe !== undefined && !same(probe, start.shinken_probe)) {
    bad.push('current_state'); why.push(`after reset current_state.shinken_probe is still ${JSON.stringify(probe)}`);
  }
  if (!emptyDiff(doc.state_diff)) {
    bad.push('state_diff'); why.push(`after reset state_diff is ${JSON.stringify(doc.state_diff).slice(0, 120)}`);
  }
  return bad.length ? result(false, bad, why.join('; ')) : result(true, [], 'reset: back to initial/default, empty diff');
}

// 4. A state of more than 1 MB of multi-byte UTF-8 comes back byte for byte (a body read in
// chunks and decoded per chunk breaks the characters that straddle chunk boundaries).
function bigText() {
  const parts = ['é', '中', '😀', 'ß', 'ж', '𝄞', 'a'];
  const out = [];
  let bytes = 0;
  for (let i = 0; bytes < 1_200_000; i += 1) {
    const p = parts[(i * 5 + (i >> 3)) % parts.length];  // 5 is prime to 7: neighbours differ
    out.push(p);
    bytes += Buffer.byteLength(p);
  }
  return out.join('');
}

// The body written in odd-sized pieces with a pause between them (Content-Length kept), so the
// app's server reads it in chunks whose edges fall inside multi-byte characters whatever the
// load: sent in one write, a quiet machine can hand it over in chunks whose edges happen to
// fall between characters, and a per-chunk decoder then goes unnoticed.
const PIECE = 8191;
function postPaced(sid, body) {
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}/post?sid=${encodeURIComponent(sid)}`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'content-length': data.length,
        'x-shinken-state-key': stateKey(sid) },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    }, (res) => {
      const parts = [];
      res.on('data', (c) => parts.push(c));
      res.on('end', () => (res.statusCode === 200 ? resolve()
        : reject(new Error(`POST /post (${body.action}) answered ${res.statusCode}: ${Buffer.concat(parts).toString('utf8').slice(0, 160)}`))));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setNoDelay(true);
    (async () => {
      for (let at = 0; at < data.length; at += PIECE) {
        req.write(data.subarray(at, at + PIECE));
        await new Promise((r) => setTimeout(r, 2));
      }
      req.end();
    })().catch(reject);
  });
}

async function utf8Large(sid) {
  const text = bigText();
  const start = { ...(await defaults(sid)), shinken_probe_utf8: text };
  await postPaced(sid, { action: 'set', state: start });
  let doc;
  try {
    doc = await go(sid);
  } catch (e) {
    return result(false, ALL, `after a ${Buffer.byteLength(text)}-byte UTF-8 set, ${e.message}`);
  }
  const bad = [];
  for (const field of ['current_state', 'initial_state']) {
    const got = pick(doc[field], 'shinken_probe_utf8');
    if (got !== text) {
      bad.push(field);
      if (typeof got === 'string') {
        let i = 0;
        while (i < got.length && got[i] === text[i]) i += 1;
        bad.push(`@${field}: differs from character ${i} of ${text.length} (got ${JSON.stringify(got.slice(i, i + 3))})`);
      } else {
        bad.push(`@${field}: ${typeof got}`);
      }
    }
  }
  const fields = bad.filter((b) => !b.startsWith('@'));
  const why = bad.filter((b) => b.startsWith('@')).map((b) => b.slice(1));
  if (fields.length) return result(false, fields, `${Buffer.byteLength(text)} bytes of UTF-8 did not round-trip: ${why.join('; ')}`);
  return result(true, [], `${Buffer.byteLength(text)} bytes of multi-byte UTF-8 round-tripped through set and /go`);
}

// 5. The app's own server answers (any HTTP status) on both loopback families inside the hub.
async function dualStack() {
  const got = [];
  const failed = [];
  for (const host of ['127.0.0.1', '[::1]']) {
    try {
      await call(`http://${host}:${arg.internal}/`);  // any HTTP answer: the app listens there
      got.push(host);
    } catch (e) {
      failed.push(`${host}: ${e.cause?.code || e.message}`);
    }
  }
  // Fields: none. Forks reach the app through the hub's supervisor, which connects to it on
  // whichever family it answers, so no reward run by shinken reads less because of this.
  if (failed.length) {
    return result(false, [], `the app answers ${got.length ? `only on ${got.join(', ')}` : 'on neither family'} (${failed.join('; ')})`);
  }
  return result(true, [], `answers on 127.0.0.1 and [::1] port ${arg.internal}`);
}

const CHECKS = [
  ['fresh_diff_empty', () => freshDiffEmpty([arg.sids[0], arg.sids[5]])],
  ['change_shows', () => changeShows(arg.sids[1])],
  ['reset', () => reset(arg.sids[2])],
  ['utf8_large', () => utf8Large(arg.sids[3])],
  ['dual_stack', () => dualStack()],
];

const results = {};
for (const [name, fn] of CHECKS) {
  try {
    results[name] = await fn();
  } catch (e) {
    results[name] = result(false, name === 'dual_stack' ? [] : ALL, `the State API failed: ${e.cause?.code || e.message}`);
  }
}
process.stdout.write(JSON.stringify({ app: arg.app, results, ms: Date.now() - t0 }));
