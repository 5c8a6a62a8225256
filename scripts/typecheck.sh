#!/usr/bin/env bash
# Type-check the substrate (sandbox/, probes/, computer/, provider/), judge/, needs/, triage/, bundles/, profiles/, report/,
# download/, publish/, images/, mockweb/, workspace/, fleet/, live/ and reclaim.py with mypy, settings in
# pyproject.toml [tool.mypy]. The repository root is the `shinken` package itself, so
# mypy sees it through a `shinken` link in a scratch folder.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
ln -s "$PWD" "$root/shinken"
repo=$PWD
cd "$root"  # messages name shinken/sandbox/... files
# The guest program images/guest/shinken-desktop-state (Python without a .py name, run inside the
# image) by its path: bodies checked; its signatures are not all annotated yet, and gi (PyGObject)
# exists only in the image. Its sibling module shinken_x11.py sits beside it in the guest folder.
MYPYPATH="$repo/images/guest" "$repo/.venv/bin/python" -m mypy --config-file "$repo/pyproject.toml" --cache-dir "$repo/.venv/mypy-cache" \
  --allow-untyped-defs --allow-incomplete-defs "$repo/images/guest/shinken-desktop-state"
exec "$repo/.venv/bin/python" -m mypy --config-file "$repo/pyproject.toml" --cache-dir "$repo/.venv/mypy-cache" \
  -p shinken.sandbox -p shinken.probes -p shinken.computer -p shinken.profiles -p shinken.report -p shinken.judge -p shinken.needs -p shinken.triage -p shinken.bundles \
  -p shinken.download -p shinken.publish -p shinken.images -p shinken.provider -p shinken.mockweb -p shinken.workspace \
  -p shinken.fleet -p shinken.live -p shinken.integrity -m shinken.reclaim -m shinken.failure_kinds -m shinken.periodic -m shinken.pyast "$@"
