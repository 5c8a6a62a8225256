#!/usr/bin/env bash
# Run the test suite against a real Docker engine (started if needed): what CI runs.
#   scripts/test.sh [PYTEST ARGS]          every test (images built or reused, dockerd started if needed)
#   scripts/test.sh --fast [PYTEST ARGS]   the everyday loop: every test not marked `docker` or `slow`,
#                                          with Docker pointed at a socket that is not there, so a test
#                                          that needs the engine but lacks the mark fails instead of hiding
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then fast=1; shift; fi
if [ "$fast" = 1 ]; then
  SHINKEN_SETUP_ONLY=venv bash scripts/setup.sh  # the virtualenv and the host tools; no engine, no images
else
  bash scripts/setup.sh
fi
bash scripts/typecheck.sh  # the substrate (sandbox/, probes/, computer/) is typed end to end
set +e
if [ "$fast" = 1 ]; then
  DOCKER_HOST=unix:///nonexistent/shinken-fast-tier.sock .venv/bin/python -m pytest -m "not docker and not slow" "$@"
else
  .venv/bin/python -m pytest "$@"
fi
rc=$?
set -e
if [ "$rc" = 5 ]; then echo "shinken: pytest collected no tests" >&2; exit 1; fi
exit "$rc"
