#!/usr/bin/python3
"""Make Thunderbird select its start folder every time, not by the luck of a race (image build step).

Thunderbird 140's messenger.js (`loadStartFolder`, run at startup when no session is restored)
selects the default account's start folder by adding a "load" listener to the first tab's
about:3pane browser, after several awaits (the calendar component, the session file). Whether the
folder is selected then depends on timing:

- when about:3pane has loaded before the listener is added (a warm start: a relaunch on a profile
  that has started once), the listener never fires: no folder is selected and the window shows the
  tab's default title, `Home - Mozilla Thunderbird`;
- when "load" fires before about:3pane's own asynchronous DOMContentLoaded setup has built the
  folder tree, `displayFolder` finds no row (or no tree) and nothing is selected either.

So a profile's first start (cold, slow) usually showed `Local Folders - Mozilla Thunderbird`, and
a relaunch of the same profile sometimes `Home`. The replacement waits for about:3pane's own
`hasDOMContentLoaded` promise (what Thunderbird's extension code waits for), whether the page
loaded before or after this point. The build fails when the original code is not found exactly
once (another Thunderbird version: look again before changing the pattern).

Usage: thunderbird_start_folder.py OMNI_JA (rewritten in place; every entry kept, stored)."""

from __future__ import annotations

import os
import sys
import zipfile

ENTRY = "chrome/messenger/content/messenger/messenger.js"
OLD = """      tab.chromeBrowser.addEventListener(
        "load",
        () => (tab.folder = startFolder),
        true
      );
"""
NEW = """      // shinken: select the start folder once about:3pane has set itself up, whether it loaded
      // before this point or loads later (the plain "load" listener raced with both).
      const showStartFolder = () =>
        tab.chromeBrowser.contentWindow?.hasDOMContentLoaded?.promise.then(
          () => (tab.folder = startFolder)
        );
      if (!showStartFolder()) {
        const onLoad = () => {
          if (showStartFolder()) {
            tab.chromeBrowser.removeEventListener("load", onLoad, true);
          }
        };
        tab.chromeBrowser.addEventListener("load", onLoad, true);
      }
"""


def patch(path: str) -> None:
    real = os.path.realpath(path)
    tmp = real + ".shinken-tmp"
    with zipfile.ZipFile(real) as src:
        text = src.read(ENTRY).decode("utf-8")
        if text.count(OLD) != 1:
            raise SystemExit(f"{ENTRY} in {real}: the start-folder code to patch was found {text.count(OLD)} times, "
                             "expected once (another Thunderbird version?)")
        with zipfile.ZipFile(tmp, "w") as dst:
            for info in src.infolist():
                data = text.replace(OLD, NEW).encode("utf-8") if info.filename == ENTRY else src.read(info)
                dst.writestr(info, data, compress_type=info.compress_type)
    os.chmod(tmp, os.stat(real).st_mode & 0o7777)
    os.replace(tmp, real)
    with zipfile.ZipFile(real) as check:
        if "showStartFolder" not in check.read(ENTRY).decode("utf-8"):
            raise SystemExit(f"{real}: patch not found after writing")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.splitlines()[-1])
    patch(sys.argv[1])
    print(f"patched {ENTRY} in {os.path.realpath(sys.argv[1])}")
