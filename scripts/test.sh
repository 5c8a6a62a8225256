#!/usr/bin/env bash
# Run the test suite against a real Docker engine (started if needed): what CI runs.
#   scripts/test.sh [PYTEST ARGS]          every test (images built or reused, dockerd started if needed)
#                                          with no test path, -k or -m among the args: two pytest runs
#                                          side by side, the NeMo Gym modules (marker `gym`, log in
#                                          out/test-gym.log, printed at the end) and the rest
#   scripts/test.sh --serial [PYTEST ARGS] every test in one pytest run
#   scripts/test.sh --fast [PYTEST ARGS]   the everyday loop: every test not marked `docker` or `slow`,
#                                          with Docker pointed at a socket that is not there, so a test
#                                          that needs the engine but lacks the mark fails instead of hiding
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
serial=0
if [ "${1:-}" = "--fast" ]; then fast=1; shift; fi
if [ "${1:-}" = "--serial" ]; then serial=1; shift; fi
# A run narrowed by the caller (a path, -k, -m) stays one pytest run.
for a in "$@"; do
  case "$a" in -k|-k*|-m|-m*|--deselect*|--lf|--last-failed|--sw|--stepwise) serial=1 ;; -*) ;; *) serial=1 ;; esac
done
if [ "$fast" = 1 ]; then
  SHINKEN_SETUP_ONLY=venv bash scripts/setup.sh  # the virtualenv and the host tools; no engine, no images
else
  bash scripts/setup.sh
fi
bash scripts/typecheck.sh  # the substrate (sandbox/, probes/, computer/) is typed end to end
set +e
if [ "$fast" = 1 ]; then
  DOCKER_HOST=unix:///nonexistent/shinken-fast-tier.sock .venv/bin/python -m pytest -m "not docker and not slow" "$@"
  rc=$?
elif [ "$serial" = 1 ]; then
  .venv/bin/python -m pytest "$@"
  rc=$?
else
  # The NeMo Gym modules wait mostly on Gym's own servers, the rest mostly on desktops and
  # probes: side by side on 2 cores a clean-clone run took 35.8 min wall (21 and 35 min), where
  # the serial run took 58.7 (Dec 2 2026).
  mkdir -p out
  gym_log=out/test-gym.log
  echo "shinken: the NeMo Gym tests run beside the rest; their output: $gym_log" >&2
  .venv/bin/python -m pytest -m gym "$@" > "$gym_log" 2>&1 &
  gym_pid=$!
  .venv/bin/python -m pytest -m "not gym" "$@"
  rest_rc=$?
  wait "$gym_pid"
  gym_rc=$?
  echo "=============================== NeMo Gym tests ($gym_log) ==============================="
  cat "$gym_log"
  echo "shinken: NeMo Gym tests exit $gym_rc, the rest exit $rest_rc" >&2
  if [ "$rest_rc" != 0 ] && [ "$rest_rc" != 5 ]; then rc=$rest_rc
  elif [ "$gym_rc" != 0 ] && [ "$gym_rc" != 5 ]; then rc=$gym_rc
  elif [ "$rest_rc" = 5 ] && [ "$gym_rc" = 5 ]; then rc=5
  else rc=0; fi
fi
set -e
if [ "$rc" = 5 ]; then echo "shinken: pytest collected no tests" >&2; exit 1; fi
exit "$rc"
