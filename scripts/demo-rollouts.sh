#!/usr/bin/env bash
# Rollouts of the demo workspace for the profile step, on a machine without a model: the real
# NeMo Gym 0.7.0 (runner image, built once) drives the workspace that scripts/demo.sh wrote,
# with a seeded scripted policy as the model (tests/chance_policy.py: each demo task solved
# with a known probability). Then: ROLLOUTS=out/demo/rollouts ./scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT=${OUT:-out/demo}
WORKSPACE=${WORKSPACE:-$HOME/shinken-demo-workspace}
[ -d "$WORKSPACE" ] || { echo "shinken: no workspace at $WORKSPACE; run ./scripts/demo.sh first" >&2; exit 2; }
exec .venv/bin/python tests/demo_rollouts.py --workspace "$WORKSPACE" --out "$OUT/rollouts" "$@"
