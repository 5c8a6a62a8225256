#!/usr/bin/env bash
# Prepare this machine for shinken: a virtualenv with shinken installed, a running
# Docker engine, and the task images (built once, then reused by content hash).
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "shinken: installing python3-venv ..." >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# Reinstall only when the package metadata or the pins changed (fast path for repeated runs).
# constraints.txt pins every version (refresh it with scripts/lock.sh), so every machine and
# CI install what was tested.
stamp=.venv/.shinken-installed
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! .venv/bin/python -c 'import shinken.cli.main' 2>/dev/null; then
  log=.venv/install.log
  .venv/bin/pip install -q --upgrade pip >"$log" 2>&1 || true
  # The distribution was named `shinken` before (taken on PyPI by another project): drop that install.
  if .venv/bin/pip show -q shinken >/dev/null 2>&1; then .venv/bin/pip uninstall -q -y shinken >>"$log" 2>&1 || true; fi
  rm -rf shinken.egg-info  # its metadata, left by the editable install of that name
  if ! .venv/bin/pip install -q -c constraints.txt -e '.[dev,ray]' >>"$log" 2>&1 || ! .venv/bin/python -c 'import shinken.cli.main'; then
    tail -30 "$log" >&2; echo "shinken: installing into .venv failed (log: $log)" >&2; exit 1
  fi
  echo "$want" > "$stamp"
fi

# Base images come from debootstrap (no registry reachable here).
if ! command -v debootstrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "shinken: installing debootstrap ..." >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
fi
# Debian's docker-registry serves the simulated fleet's registry in the fleet tests (docs/fleet.md).
if ! command -v docker-registry >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "shinken: installing docker-registry (fleet tests) ..." >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null 2>&1 || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null; }
fi
# Headless Chromium renders `shinken report` pages in the tests (Debian's package; installed once).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "shinken: installing chromium (report tests) ..." >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null 2>&1 || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null; }
fi
# `shinken watch` serves noVNC through Debian's websockify (x11vnc runs in the fork; installed once).
if { ! command -v websockify >/dev/null 2>&1 || [ ! -f /usr/share/novnc/vnc.html ]; } && [ "$(id -u)" = 0 ]; then
  echo "shinken: installing websockify and novnc (shinken watch) ..." >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends websockify novnc >/dev/null 2>&1 || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends websockify novnc >/dev/null; }
fi
# SHINKEN_SETUP_ONLY=venv (scripts/test.sh --fast): stop before the engine and the images.
if [ "${SHINKEN_SETUP_ONLY:-}" = venv ]; then exit 0; fi
bash scripts/ensure-docker.sh
.venv/bin/shinken image build ${SHINKEN_IMAGES:-all}
