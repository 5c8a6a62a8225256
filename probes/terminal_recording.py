"""A solution's run on a computer without a desktop, as a recording: the commands run and what
they printed, then the reward's output, drawn as an animated SVG (CSS animation only: no script
runs in an image) that types them out in the order and roughly at the pace they ran."""

from __future__ import annotations

from html import escape

TERM_W = 760
TERM_COLS = 100
LINE_H = 16
MAX_LINES_PER_STEP = 10
MAX_LINES = 48


def _wrap(text: str) -> list[str]:
    out = []
    for raw in text.replace("\t", "    ").splitlines() or [""]:
        raw = "".join(c if c.isprintable() else "·" for c in raw)
        out += [raw[i:i + TERM_COLS] for i in range(0, max(len(raw), 1), TERM_COLS)]
    return out


def svg_height(svg: str) -> int:
    return int(svg.split('height="', 1)[1].split('"', 1)[0])


def terminal_svg(steps: list[tuple[str, str, float]], reward: float | None, reward_tail: str) -> str:
    """The steps as a terminal that types them out: the first command shows from the start, each
    later one (with what it answered) when it ran (at least 0.8 s, at most 4 s apart), the reward
    last; it holds 3 s and starts over.
    Self-contained SVG (CSS animation only: no script runs in an image)."""
    blocks: list[tuple[list[tuple[str, str]], float]] = []  # (lines with their class, seconds shown before the next)
    for shown, answer, seconds in steps:
        lines = [(s, "cmd") for s in _wrap(shown)[:3]]
        body = _wrap(answer.strip()) if answer.strip() else []
        if len(body) > MAX_LINES_PER_STEP:
            body = [f"… {len(body) - MAX_LINES_PER_STEP + 1} more line(s)"] + body[-(MAX_LINES_PER_STEP - 1):]
        lines += [(s, "out") for s in body]
        blocks.append((lines, min(4.0, max(0.8, seconds))))
    verdict = "reward: " + ("none" if reward is None else f"{reward:g}")
    tail = [s for s in _wrap(reward_tail.strip())[-4:] if s] if reward_tail.strip() else []
    blocks.append(([("# reward.py", "cmd"), *((s, "out") for s in tail), (verdict, "reward")], 3.0))
    total_lines = sum(len(b) for b, _ in blocks)
    while total_lines > MAX_LINES and len(blocks) > 2:  # the earliest steps go first
        total_lines -= len(blocks.pop(0)[0])
    cycle = sum(s for _, s in blocks)
    height = 16 + total_lines * LINE_H
    css = ["text{font:12px 'DejaVu Sans Mono',monospace;white-space:pre}.cmd{fill:#9ae6b4}.out{fill:#e2e8f0}"
           ".reward{fill:#fbd38d;font-weight:bold}"]
    body = []
    y, t = 12 + 12, 0.0
    for i, (lines, shown_s) in enumerate(blocks):
        at = 100 * t / cycle
        css.append("" if i == 0 else f"@keyframes s{i}{{0%,{at:.2f}%{{opacity:0}}{min(at + 0.01, 100):.2f}%,100%{{opacity:1}}}}"
                   f".s{i}{{animation:s{i} {cycle:.2f}s step-end infinite}}")
        texts = []
        for text, cls in lines:
            texts.append(f'<text x="10" y="{y}" class="{cls}">{escape(text)}</text>')
            y += LINE_H
        body.append(f'<g class="s{i}">{"".join(texts)}</g>')
        t += shown_s
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{TERM_W}" height="{height}" '
            f'viewBox="0 0 {TERM_W} {height}"><style>{"".join(css)}</style>'
            f'<rect width="100%" height="100%" rx="6" fill="#1a202c"/>{"".join(body)}</svg>')
