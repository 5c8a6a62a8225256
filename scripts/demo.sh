#!/usr/bin/env bash
# The main job over the demo bundles shipped in demo/: triage -> probe -> make-workspace.
# Outputs land in out/demo/ (triage.json, receipt.json, workspace/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
IMAGE=${SHINKEN_IMAGE:-shinken/sandbox-cua:latest}
OUT=${OUT:-out/demo}
mkdir -p "$OUT"
S=.venv/bin/shinken
set -x
"$S" triage demo --image "$IMAGE" --json "$OUT/triage.json"
"$S" probe demo --image "$IMAGE" --triage "$OUT/triage.json" --receipt "$OUT/receipt.json" \
  --state-fidelity filesystem --run-dir "$OUT/probe-run"
"$S" make-workspace --dest "$OUT/workspace" --task-root demo --ids-file "$OUT/receipt.json" \
  --image "$IMAGE" --force
