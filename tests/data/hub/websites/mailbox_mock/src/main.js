import { DEFAULT_STATE } from './defaults.js';

const sid = new URLSearchParams(window.location.search).get('sid');
const q = sid ? `?sid=${encodeURIComponent(sid)}` : '';
let state = null;

async function load() {
  const r = await fetch(`/state${q}`, { cache: 'no-store' });
  const doc = await r.json();
  state = doc.has_custom_state ? doc.stored_state : structuredClone(DEFAULT_STATE);
  render();
  if (!state.view) {
    // The first load saves the page's view settings, as the hub's mocks save their defaults.
    state.view = { folder: 'inbox' };
    await save();
  }
}

async function save() {
  await fetch(`/post${q}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ action: 'set_current', state }),
  });
}

function button(label, onClick) {
  const b = document.createElement('button');
  b.textContent = label;
  b.addEventListener('click', async () => { onClick(); render(); await save(); });
  return b;
}

function render() {
  document.getElementById('user').textContent = `Signed in as ${state.user?.name ?? 'nobody'}`;
  const list = document.getElementById('messages');
  list.replaceChildren();
  for (const m of state.messages ?? []) {
    if (m.folder !== 'inbox') continue;
    const li = document.createElement('li');
    li.dataset.id = m.id;
    const span = document.createElement('span');
    span.textContent = `${m.starred ? '★ ' : ''}${m.subject}`;
    li.append(span,
      button(m.starred ? `Unstar ${m.subject}` : `Star ${m.subject}`, () => { m.starred = !m.starred; }),
      button(`Archive ${m.subject}`, () => { m.folder = 'archive'; }));
    list.append(li);
  }
  document.title = `Mailbox (${(state.messages ?? []).filter((m) => m.folder === 'inbox').length} in inbox)`;
}

document.getElementById('compose').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const input = document.getElementById('subject');
  const subject = input.value.trim();
  if (!subject) return;
  state.messages = [...(state.messages ?? []), { id: `m${Date.now()}`, subject, folder: 'inbox', starred: false }];
  input.value = '';
  render();
  await save();
});

load();
