// shinken's stand-in mock: the CUA-Gym-Hub State API (see ../../README.md) as a Vite plugin,
// registered for the dev and the preview server exactly like the hub's mocks register theirs.
import { defineConfig } from 'vite';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { DEFAULT_STATE } from './src/defaults.js';

const ROOT = process.cwd();
const STATES = path.join(ROOT, '.mock-states');
const FILES = path.join(ROOT, '.mock-files');

const cleanSid = (sid) => (sid ? String(sid).replace(/[^A-Za-z0-9_-]/g, '') : '');

function stateFiles(sid) {
  const s = cleanSid(sid);
  if (!s) return { current: path.join(ROOT, '.mock-state.json'), initial: path.join(ROOT, '.mock-state.initial.json') };
  return { current: path.join(STATES, `${s}.json`), initial: path.join(STATES, `${s}.initial.json`) };
}

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

function writeJson(file, doc) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(doc));
  fs.renameSync(tmp, file); // a reader never sees half a state
}

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

function merged(base, patch) {
  const out = { ...(isPlainObject(base) ? base : {}) };
  for (const [k, v] of Object.entries(patch ?? {})) out[k] = isPlainObject(v) ? merged(out[k], v) : v;
  return out;
}

// One entry per top-level key of `current` whose value differs from `initial`.
function topLevelDiff(initial, current) {
  const diff = {};
  for (const key of Object.keys(current ?? {})) {
    const before = initial ? initial[key] : undefined;
    if (initial && JSON.stringify(before) === JSON.stringify(current[key])) continue;
    diff[key] = before ? { modified: current[key] } : { added: current[key] };
  }
  return diff;
}

function query(req) {
  return new URL(req.originalUrl || req.url || '/', 'http://mock').searchParams;
}

function json(res, status, doc) {
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Cache-Control', 'no-cache, no-store');
  res.end(JSON.stringify(doc));
}

async function body(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks);
}

function handlePost(payload, sid) {
  const files = stateFiles(sid);
  const action = payload.action || 'set';
  if (action === 'reset') {
    for (const f of [files.current, files.initial]) fs.rmSync(f, { force: true });
    return [200, { success: true, sid, message: 'State reset to default.' }];
  }
  if (action !== 'set' && action !== 'set_current') return [400, { error: `unknown action ${JSON.stringify(action)}` }];
  const current = readJson(files.current) ?? {};
  const next = payload.merge ? merged(current, payload.state) : payload.state;
  if (!isPlainObject(next)) return [400, { error: 'state must be an object' }];
  if (!fs.existsSync(files.initial)) {
    const initial = action === 'set' ? next : (payload.initial_state ?? DEFAULT_STATE);
    writeJson(files.initial, initial);
  }
  writeJson(files.current, next);
  return [200, { success: true, sid, state: next }];
}

// Minimal multipart/form-data reader: the file parts of one upload.
function fileParts(buf, boundary) {
  const out = [];
  const sep = Buffer.from(`--${boundary}`);
  let at = buf.indexOf(sep);
  while (at !== -1) {
    const next = buf.indexOf(sep, at + sep.length);
    if (next === -1) break;
    const part = buf.subarray(at + sep.length + 2, next - 2); // CRLF after the boundary, CRLF before the next
    const headEnd = part.indexOf('\r\n\r\n');
    if (headEnd !== -1) {
      const head = part.subarray(0, headEnd).toString('utf8');
      const name = /filename="([^"]*)"/i.exec(head)?.[1];
      const type = /content-type:\s*([^\r\n]+)/i.exec(head)?.[1]?.trim();
      if (name) out.push({ name, type: type || 'application/octet-stream', data: part.subarray(headEnd + 4) });
    }
    at = next;
  }
  return out;
}

const MIME = { '.txt': 'text/plain', '.csv': 'text/csv', '.json': 'application/json', '.pdf': 'application/pdf',
  '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif', '.zip': 'application/zip' };

function stateApi(server) {
  server.middlewares.use(async (req, res, next) => {
    const url = new URL(req.url || '/', 'http://mock');
    const sid = query(req).get('sid') || null;
    try {
      if (url.pathname === '/post' && req.method === 'POST') {
        let payload;
        try {
          payload = JSON.parse((await body(req)).toString('utf8') || '{}');
        } catch (e) {
          return json(res, 400, { error: `body is not JSON: ${e.message}` });
        }
        const [status, doc] = handlePost(payload, sid);
        return json(res, status, doc);
      }
      if (url.pathname === '/go' && req.method === 'GET') {
        const files = stateFiles(sid);
        const current = readJson(files.current);
        const initial = readJson(files.initial) ?? current ?? DEFAULT_STATE;
        const now = current ?? initial;
        return json(res, 200, { initial_state: initial, current_state: now, state_diff: topLevelDiff(initial, now) });
      }
      if (url.pathname === '/state' && req.method === 'GET') {
        const current = readJson(stateFiles(sid).current);
        return json(res, 200, { stored_state: current, has_custom_state: current !== null, sid });
      }
      if (url.pathname === '/upload' && req.method === 'POST') {
        const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(req.headers['content-type'] || '');
        if (!m) return json(res, 400, { error: 'Content-Type must be multipart/form-data' });
        const parts = fileParts(await body(req), m[1] || m[2]);
        if (!parts.length) return json(res, 400, { error: 'No files found in request' });
        const dirSid = cleanSid(sid) || '_default';
        const dir = path.join(FILES, dirSid);
        fs.mkdirSync(dir, { recursive: true });
        const files = parts.map((p) => {
          const stored = `${crypto.randomBytes(4).toString('hex')}_${p.name.replace(/[^A-Za-z0-9._-]/g, '_')}`;
          fs.writeFileSync(path.join(dir, stored), p.data);
          return { original_name: p.name, stored_name: stored, size: p.data.length, content_type: p.type,
            url: `/files/${dirSid}/${stored}` };
        });
        return json(res, 200, { success: true, files });
      }
      if (url.pathname.startsWith('/files/') && req.method === 'GET') {
        const [dirSid, ...rest] = url.pathname.slice('/files/'.length).split('/').filter(Boolean);
        const name = rest.join('/').replace(/[^A-Za-z0-9._-]/g, '_');
        const file = path.join(FILES, cleanSid(dirSid), name);
        if (!dirSid || !name || !fs.existsSync(file)) {
          res.statusCode = 404;
          return res.end('File not found');
        }
        const data = fs.readFileSync(file);
        res.setHeader('Content-Type', MIME[path.extname(name).toLowerCase()] || 'application/octet-stream');
        res.setHeader('Content-Length', data.length);
        return res.end(data);
      }
    } catch (e) {
      return json(res, 500, { error: String(e && e.message ? e.message : e) });
    }
    return next();
  });
}

export default defineConfig({
  plugins: [{ name: 'shinken-standin-state-api', configureServer: stateApi, configurePreviewServer: stateApi }],
  preview: { host: '0.0.0.0', allowedHosts: true },
  server: { host: true, allowedHosts: true },
});
