"""Driving the task browser (`shinken report --tasks`) in headless Chromium: open it from disk,
wait until it drew, change a filter, open a task, and read back what the page shows."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import browser as br

WIDTH = 1300


@dataclass
class Tab:
    browser: br.Browser
    session: str
    since: int
    folder: Path

    def eval(self, expression: str, timeout: float = 60) -> Any:
        return self.browser.evaluate(self.session, expression, timeout)

    def wait(self, expression: str, timeout: float = 60) -> Any:
        """Poll `expression` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.eval(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"not true within {timeout:.0f} s: {expression}")
            time.sleep(0.1)

    def shown(self) -> dict[str, Any]:
        """The rows drawn (task, verdict and outcome tags) and the counts the page says."""
        return self.eval("""(() => ({
          rows: [...document.querySelectorAll('#rows tr.row')].map(r => ({task: r.dataset.task,
            tags: [...r.querySelectorAll('.tag')].map(t => t.textContent)})),
          shown: document.getElementById('shown').textContent,
          pages: document.querySelector('#pager-top span').textContent}))()""")

    def choose(self, facet: str, value: str) -> None:
        """Pick `value` in the facet's select (as a user does: a change event), wait for the redraw."""
        found = self.eval(f"""(() => {{ const s = document.querySelector('select[data-facet="{facet}"]');
          if (!s || ![...s.options].some(o => o.value === {json.dumps(value)})) return false;
          s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); return true; }})()""")
        assert found, f"no option {value!r} in the {facet} filter"
        self.wait(f"location.hash.includes({json.dumps(facet + '=')})")

    def open_task(self, task_id: str) -> dict[str, Any]:
        """Open a task through the URL (as a link does), wait for its details and every image in them
        to load; what the details show."""
        self.eval(f"location.hash = 'task=' + encodeURIComponent({json.dumps(task_id)})")
        self.wait(f"!!document.querySelector('tr[data-detail=\"{task_id}\"] td.detail[data-loaded]')")
        self.wait(f"[...document.querySelectorAll('tr[data-detail] img')].every(i => i.complete)")
        return self.eval(f"""(() => {{ const d = document.querySelector('tr[data-detail="{task_id}"]');
          return {{text: d.textContent,
                   images: [...d.querySelectorAll('img')].map(i => ({{media: i.dataset.media, of: i.dataset.of || null,
                     src: i.getAttribute('src'), width: i.naturalWidth, height: i.naturalHeight}})),
                   tails: Object.fromEntries([...d.querySelectorAll('pre[data-k]')].map(p => [p.dataset.k, p.textContent]))}};
        }})()""")

    def thumbs(self) -> list[dict[str, Any]]:
        """The start-state thumbnails of the rows drawn, once all have loaded."""
        self.wait("[...document.querySelectorAll('img[data-media=thumb]')].every(i => i.complete)")
        return self.eval("""[...document.querySelectorAll('#rows tr.row')].map(r => { const i = r.querySelector('img');
          return {task: r.dataset.task, width: i ? i.naturalWidth : 0, note: r.querySelector('td.thumb').textContent}; })""")

    def problems(self) -> tuple[list[str], list[str]]:
        return br.problems_since(self.browser, self.session, self.since)

    def screenshot(self, out: Path) -> None:
        png, _, _ = br.screenshot(self.browser, self.session, WIDTH)
        out.write_bytes(png)


def open_browser(b: br.Browser, folder: Path, height: int = 900) -> Tab:
    """The task browser in `folder`, opened from disk and drawn."""
    s, since = br.navigate(b, (folder / "index.html").resolve().as_uri(), WIDTH, height)
    tab = Tab(b, s, since, folder)
    tab.wait("document.body.dataset.ready === '1'")
    return tab


def only_local(requests: list[str], folder: Path) -> list[str]:
    """The requests that left the browser's folder (none may)."""
    base = folder.resolve().as_uri() + "/"
    return [u for u in requests if not (u.startswith(base) or u.startswith("data:"))]
