"""The task browser's page: static HTML with its CSS and script inline. It reads the index
(`data/index.js`, report/task_site.py), draws the filters with their counts and one page of rows,
and loads a task's details file when its row opens. Every text from the data goes in through
`textContent` (never as markup); images only through `<img>`, where an SVG runs no script.

The page's state (filters, search, page, open task) is in the URL's fragment, so a link opens the
same view: `index.html#task=<id>` opens that task. `document.body.dataset.ready` is set once the
first page is drawn (`window.SHINKEN_READY_MS`: milliseconds since navigation), for tests and
benchmarks/bench_task_browser.py."""

from __future__ import annotations

PAGE_ROWS = 50

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1a202c;margin:0;background:#fff}
main{max-width:1280px;margin:0 auto;padding:20px}
h1{font-size:24px;margin:0 0 4px}.meta{color:#4a5568;font-size:13px;margin:0 0 12px}
#filters{display:flex;flex-wrap:wrap;gap:8px 14px;align-items:end;margin:10px 0;padding:10px;background:#f7fafc;
  border:1px solid #cbd5e0;border-radius:6px}
#filters label{display:flex;flex-direction:column;font-size:12px;color:#4a5568;gap:2px}
#filters select,#filters input{font-size:13px;padding:3px 4px;max-width:230px}
#filters input[type=search]{width:240px}
button{font-size:13px;padding:3px 10px;cursor:pointer}
.pager{display:flex;gap:10px;align-items:center;font-size:13px;margin:8px 0}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #e2e8f0;padding:5px 6px;text-align:left;vertical-align:top}
th{background:#edf2f7;position:sticky;top:0}
tr.row{cursor:pointer}tr.row:hover{background:#f7fafc}tr.row.open{background:#ebf8ff}
td.thumb{width:132px}td.thumb img{width:128px;height:72px;object-fit:cover;border:1px solid #a0aec0;display:block;background:#000}
td.thumb span{display:block;width:128px;height:72px;border:1px dashed #cbd5e0;color:#a0aec0;font-size:11px;
  text-align:center;line-height:72px}
td.id{font-family:monospace;font-size:12px;word-break:break-all;max-width:190px}
td.instr{max-width:420px;color:#2d3748}
.tag{display:inline-block;border:1px solid #a0aec0;border-radius:3px;padding:0 4px;margin:1px 2px 1px 0;font-size:11px;
  white-space:nowrap}
.tag.kept,.tag.runnable{border-color:#2f855a;color:#22543d}.tag.dropped,.tag.defective{border-color:#c53030;color:#9b2c2c}
.tag.blocked{border-color:#b7791f;color:#744210}.tag.rec{border-color:#2b6cb0;color:#2a4365}
td.detail{background:#fbfdff;padding:12px 16px}
.detail h3{font-size:15px;margin:14px 0 6px}.detail h3:first-child{margin-top:0}
.detail p{margin:4px 0}.detail .instruction{font-size:14px;white-space:pre-wrap}
.detail table{width:auto;margin:4px 0}.detail td,.detail th{border:1px solid #e2e8f0}
pre{background:#1a202c;color:#e2e8f0;padding:8px 10px;border-radius:4px;font-size:12px;white-space:pre-wrap;
  word-break:break-all;max-height:240px;overflow:auto;margin:4px 0}
figure{display:inline-block;margin:6px 16px 6px 0;vertical-align:top}
figure img{max-width:580px;height:auto;border:1px solid #a0aec0;display:block}
figcaption{font-size:12px;color:#4a5568;margin-top:3px}
.note{font-size:12px;color:#4a5568}.empty{padding:30px;text-align:center;color:#4a5568}
"""

SCRIPT = r"""
(function () {
  "use strict";
  const D = window.SHINKEN_INDEX, C = D.cols, N = D.n, DICT = D.dicts, PAGE = %(page_rows)d;
  const FACETS = [["app", "app"], ["verdict", "verdict"], ["outcome", "outcome"], ["reasons", "reason"],
                  ["tier", "tier"], ["family", "family"], ["overlap", "benchmark overlap"], ["band", "band"],
                  ["media", "media"]];
  const details = {}, waiting = {};
  let state = {q: "", f: {}, page: 0, open: null};

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "text") e.textContent = v; else if (k === "cls") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  const tag = (text, cls) => el("span", {cls: "tag " + (cls || ""), text});

  // Facet values of task i: codes (single-valued columns), lists (reasons), or derived (overlap, media).
  function values(name, i) {
    if (name === "reasons") return C.reasons[i];
    if (name === "overlap") return [C.overlap[i] ? "yes" : "no"];
    if (name === "media") return [C.start[i] ? "start screenshot" : null, C.recordings[i] ? "recording" : null,
                                  !C.start[i] && !C.recordings[i] ? "none" : null].filter(x => x);
    return [C[name][i]];
  }
  function label(name, v) { return DICT[name] ? DICT[name][v] : v; }
  function keyOf(name, v) { return String(label(name, v)); }

  function matches(i, skip) {
    for (const [name] of FACETS) {
      if (name === skip) continue;
      const want = state.f[name];
      if (want === undefined || want === "") continue;
      if (!values(name, i).some(v => keyOf(name, v) === want)) return false;
    }
    if (state.q) {
      const q = state.q.toLowerCase();
      if (!D.ids[i].toLowerCase().includes(q) && !C.instruction[i].toLowerCase().includes(q)) return false;
    }
    return true;
  }

  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    state = {q: p.get("q") || "", f: {}, page: Math.max(0, parseInt(p.get("page") || "1", 10) - 1 || 0),
             open: p.get("task")};
    for (const [name] of FACETS) if (p.get(name)) state.f[name] = p.get(name);
  }
  function writeHash() {
    const p = new URLSearchParams();
    if (state.q) p.set("q", state.q);
    for (const [k, v] of Object.entries(state.f)) if (v) p.set(k, v);
    if (state.page) p.set("page", String(state.page + 1));
    if (state.open) p.set("task", state.open);
    history.replaceState(null, "", "#" + p.toString());
  }

  function drawFilters(shown) {
    const box = document.getElementById("filters");
    box.textContent = "";
    const search = el("input", {type: "search", placeholder: "task id or instruction", value: state.q,
      oninput: e => { state.q = e.target.value; state.page = 0; state.open = null; draw(); }});
    search.id = "search";
    box.append(el("label", {}, "search", search));
    for (const [name, title] of FACETS) {
      const counts = new Map();
      for (let i = 0; i < N; i++) {
        if (!matches(i, name)) continue;
        for (const v of values(name, i)) { const k = keyOf(name, v); counts.set(k, (counts.get(k) || 0) + 1); }
      }
      if ([...counts.keys()].every(k => k === "") && !state.f[name]) continue;  // no data for this facet
      const sel = el("select", {"data-facet": name, onchange: e => {
        state.f[name] = e.target.value; state.page = 0; state.open = null; draw(); }});
      sel.append(el("option", {value: "", text: "all"}));
      const keys = [...counts.keys()].filter(k => k !== "").sort((a, b) => counts.get(b) - counts.get(a) || (a < b ? -1 : 1));
      if (state.f[name] && !counts.has(state.f[name])) keys.push(state.f[name]);
      for (const k of keys) {
        const o = el("option", {value: k, text: k + " (" + (counts.get(k) || 0) + ")"});
        if (state.f[name] === k) o.selected = true;
        sel.append(o);
      }
      box.append(el("label", {}, title, sel));
    }
    box.append(el("button", {text: "clear", onclick: () => { state = {q: "", f: {}, page: 0, open: null}; draw(); }}));
    box.append(el("span", {cls: "note", id: "shown", text: shown + " of " + N + " tasks"}));
  }

  function pager(pages, where) {
    const box = document.getElementById(where);
    box.textContent = "";
    const go = p => { state.page = p; state.open = null; draw(); window.scrollTo(0, 0); };
    box.append(el("button", {text: "◀ previous", disabled: state.page <= 0 ? "" : null, onclick: () => go(state.page - 1)}));
    box.append(el("span", {text: "page " + (pages ? state.page + 1 : 0) + " of " + pages}));
    box.append(el("button", {text: "next ▶", disabled: state.page >= pages - 1 ? "" : null, onclick: () => go(state.page + 1)}));
  }

  function thumb(i) {
    if (C.start[i]) return el("td", {cls: "thumb"}, el("img", {src: C.start[i], loading: "lazy", alt: "start state of " + D.ids[i],
                                                                 "data-media": "thumb"}));
    const why = C.desktop[i] === 0 ? "no desktop" : C.desktop[i] === 1 ? "no screenshot" :
      label("outcome", C.outcome[i]) === "(not probed)" ? "not probed" : "no media kept";
    return el("td", {cls: "thumb"}, el("span", {text: why}));
  }

  function row(i) {
    const id = D.ids[i];
    const outcome = label("outcome", C.outcome[i]), verdict = label("verdict", C.verdict[i]);
    const reasons = C.reasons[i].map(r => label("reasons", r));
    const tr = el("tr", {cls: "row" + (state.open === id ? " open" : ""), "data-task": id,
      onclick: () => { state.open = state.open === id ? null : id; draw(); }},
      thumb(i), el("td", {cls: "id", text: id}), el("td", {text: label("app", C.app[i])}),
      el("td", {}, tag(verdict, verdict)), el("td", {}, tag(outcome, outcome),
        ...reasons.filter(r => r.startsWith("probe: ")).map(r => tag(r.slice(7)))),
      el("td", {text: label("tier", C.tier[i])}), el("td", {text: label("family", C.family[i])}),
      el("td", {}, C.overlap[i] ? tag("overlap", "dropped") : null, C.recordings[i] ? tag("▶ " + C.recordings[i], "rec") : null),
      el("td", {cls: "instr", text: C.instruction[i]}));
    return tr;
  }

  // --- details: loaded per chunk through a script tag (file:// allows no fetch)
  window.shinkenDetails = function (n, text) {
    details[n] = JSON.parse(text);
    for (const cb of waiting[n] || []) cb();
    delete waiting[n];
  };
  function withDetails(i, cb) {
    const n = Math.floor(i / D.meta.chunk);
    if (details[n]) return cb(details[n][D.ids[i]]);
    if (!waiting[n]) {
      waiting[n] = [];
      document.head.append(el("script", {src: "data/details-" + n + ".js"}));
    }
    waiting[n].push(() => cb(details[n][D.ids[i]]));
  }

  function kv(pairs) {
    const t = el("table");
    for (const [k, v] of pairs) if (v !== null && v !== undefined && v !== "")
      t.append(el("tr", {}, el("th", {text: k}), el("td", {text: typeof v === "object" ? JSON.stringify(v) : String(v)})));
    return t;
  }
  const pre = (text, k) => text ? el("pre", {"data-k": k, text}) : null;

  function detailView(d) {
    const box = el("div", {cls: "detail"});
    box.append(el("h3", {text: "Instruction"}), el("p", {cls: "instruction", text: d.instruction || "(no instruction read)"}));
    const m = d.media;
    if (m && (m.start || m.recordings.length || m.errors.length || m.desktop)) {
      box.append(el("h3", {text: "What it looks like"}));
      if (m.start) box.append(el("figure", {}, el("img", {src: m.start.path, alt: "start state", "data-media": "start",
        width: m.start.width, height: m.start.height}), el("figcaption", {text: "start state (" + m.start.width + "×" +
        m.start.height + ")"})));
      else if (m.desktop) box.append(el("p", {cls: "note", text: "no start screenshot"}));
      for (const r of m.recordings) box.append(el("figure", {}, el("img", {src: r.path, alt: "recording of the " + r.of,
        "data-media": "recording", "data-of": r.of, width: r.width, height: r.height}),
        el("figcaption", {text: r.of + ": " + (r.kind === "screen" ? "screen" : "terminal") + " recording, " + r.seconds +
          " s" + (r.kind === "screen" ? ", " + r.frames + " frames" : "")})));
      for (const e of m.errors) box.append(el("p", {cls: "note", text: e}));
    }
    const t = d.triage;
    if (t) {
      box.append(el("h3", {text: "Triage: " + t.verdict}), kv([["class", t.class], ["app_type", t.app_type],
        ["difficulty", t.difficulty], ["family", t.family]]));
      if (t.reasons.length) {
        const rt = el("table", {}, el("tr", {}, el("th", {text: "reason"}), el("th", {text: "severity"}), el("th", {text: "detail"})));
        for (const r of t.reasons) rt.append(el("tr", {}, el("td", {text: r.code}), el("td", {text: r.severity || ""}),
                                                 el("td", {text: r.detail || ""})));
        box.append(rt);
      }
      if (t.benchmark_matches.length) {
        const bt = el("table", {}, el("tr", {}, ...["benchmark", "task", "score", "slots differ"].map(h => el("th", {text: h}))));
        for (const b of t.benchmark_matches) bt.append(el("tr", {}, el("td", {text: b.benchmark}), el("td", {text: b.task_id}),
          el("td", {text: b.score}), el("td", {text: Array.isArray(b.slots_differ)
            ? b.slots_differ.map(x => `${x.slot}: ${x.benchmark ?? "-"} -> ${x.task ?? "-"}`).join(", ") || "none"
            : JSON.stringify(b.slots_differ)})));
        box.append(el("p", {text: "Overlaps a benchmark task:"}), bt);
      }
    }
    const p = d.probe;
    if (p) {
      box.append(el("h3", {text: "Probe: " + p.outcome + (p.reason ? " (" + p.reason + ")" : "")}));
      box.append(el("p", {"data-k": "detail", text: p.detail || ""}));
      box.append(kv([["tier", p.tier], ["no-op rewards", (p.rewards || []).join(", ")],
                     ["windows", (p.windows || []).join("; ")],
                     ["alerts", (p.alerts || []).map(a => a.app + ": " + a.title).join("; ")], ["golden", p.golden]]));
      if (p.reward_tail) box.append(el("p", {text: "No-op reward output:"}), pre(p.reward_tail, "noop-tail"));
      const o = p.oracle;
      if (o) {
        box.append(el("h3", {text: "Oracle: " + o.outcome}), kv([["script", o.path], ["exit code", o.exit_code],
          ["reward", o.reward], ["reward error", o.reward_error], ["seconds", o.s]]));
        if (o.script_tail) box.append(el("p", {text: "Script output:"}), pre(o.script_tail, "oracle-script"));
        if (o.reward_tail) box.append(el("p", {text: "Reward output:"}), pre(o.reward_tail, "oracle-tail"));
      }
      const v = p.vandal;
      if (v) {
        box.append(el("h3", {text: "Vandal: " + v.outcome}), kv([["files", (v.files || []).join(", ")],
          ["rewards", v.rewards], ["errors", v.errors]]));
        for (const [variant, text] of Object.entries(v.reward_tails || {}))
          box.append(el("p", {text: "Reward output (" + variant + "):"}), pre(text, "vandal-" + variant));
      }
      for (const r of p.replay || []) {
        box.append(el("h3", {text: "Replay of rollout " + r.rollout + ": " + (r.match ? "reproduces" : "differs")}),
                   kv([["recorded", r.recorded], ["reward", r.reward], ["calls", r.calls], ["error", r.error]]));
        if (r.reward_tail) box.append(pre(r.reward_tail, "replay-tail"));
      }
    }
    if (d.profile) box.append(el("h3", {text: "Profile"}), kv(Object.entries(d.profile)));
    return box;
  }

  function draw() {
    const shown = [];
    for (let i = 0; i < N; i++) if (matches(i)) shown.push(i);
    if (state.open) {  // a linked task: the page that holds it
      const at = shown.indexOf(D.ids.indexOf(state.open));
      if (at >= 0) state.page = Math.floor(at / PAGE);
    }
    const pages = Math.ceil(shown.length / PAGE);
    state.page = Math.min(state.page, Math.max(0, pages - 1));
    drawFilters(shown.length);
    const body = document.getElementById("rows");
    body.textContent = "";
    for (const i of shown.slice(state.page * PAGE, state.page * PAGE + PAGE)) {
      body.append(row(i));
      if (state.open === D.ids[i]) {
        const cell = el("td", {cls: "detail", colspan: "9", text: "loading…"});
        body.append(el("tr", {"data-detail": D.ids[i]}, cell));
        withDetails(i, d => { cell.textContent = ""; cell.append(detailView(d)); cell.dataset.loaded = "1"; });
      }
    }
    if (!shown.length) body.append(el("tr", {}, el("td", {cls: "empty", colspan: "9", text: "no task matches"})));
    pager(pages, "pager-top");
    pager(pages, "pager-bottom");
    writeHash();
  }

  const meta = D.meta;
  document.getElementById("meta").textContent = N + " tasks" + (meta.probe_summary ? " (probe: " + meta.probe_summary.kept +
    " kept, " + meta.probe_summary.dropped + " dropped)" : "") + " · shinken " + meta.version + ", " + meta.generated + " · " +
    Object.entries(meta.sources).map(([k, v]) => k + ": " + v).join(" · ");
  readHash();
  window.addEventListener("hashchange", () => { readHash(); draw(); });
  draw();
  window.SHINKEN_READY_MS = performance.now();
  document.body.dataset.ready = "1";
})();
"""


def page_html() -> str:
    head = ["start", "task", "app", "verdict", "outcome", "tier", "family", "", "instruction"]
    th = "".join(f"<th>{h}</th>" for h in head)
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="icon" href="data:,"><title>shinken tasks</title><style>{CSS}</style></head><body><main>'
            '<h1>shinken tasks</h1><p class="meta" id="meta"></p><div id="filters"></div>'
            '<div class="pager" id="pager-top"></div>'
            f'<table><thead><tr>{th}</tr></thead><tbody id="rows"></tbody></table>'
            '<div class="pager" id="pager-bottom"></div></main>'
            '<script src="data/index.js"></script>'
            f'<script>{SCRIPT % {"page_rows": PAGE_ROWS}}</script></body></html>\n')
