#!/usr/bin/env bash
# The main job over the demo bundles shipped in demo/: triage -> probe -> make-workspace
# [-> profile] -> report -> publish, with default flags: every kept task's start state is
# reproduced and checked (tiers snapshot, relaunch, reprovision; docs/tiers.md), including the
# release-shaped desktop tasks whose setup leaves LibreOffice, evince or GIMP running. Reports land in out/demo/ (triage.json, receipt.json,
# report.html, report.md, the task browser tasks/index.html), the dataset as it would go to the hub in out/demo/publish/
# (--local-dir: nothing is uploaded); the NeMo Gym workspace goes outside the source tree
# (Gym would mistake the repo for a Gym checkout): ~/shinken-demo-workspace unless WORKSPACE
# says otherwise.
# After collecting rollouts of the workspace (gym eval run --num-repeats K, or, without a
# model, scripts/demo-rollouts.sh), ROLLOUTS=<their file or folder> adds the profile step.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
IMAGE=${SHINKEN_IMAGE:-shinken/sandbox-cua:latest}
OUT=${OUT:-out/demo}
WORKSPACE=${WORKSPACE:-$HOME/shinken-demo-workspace}
mkdir -p "$OUT"
S=.venv/bin/shinken
set -x
"$S" triage demo --image "$IMAGE" --report "$OUT/triage.json"
# demo/solutions.jsonl: a recorded rollout that solves hello-file; the probe replays it on a real
# fork, and make-workspace turns what reproduced into a full-reward verifier case.
# Concurrency 3 on 2 cores: the setups' own sleeps leave a core idle at 2, 4 runs out of CPU
# (docs/tiers.md, "Probe throughput"; this probe: 45.7 s at 2, 39.9 s at 3, fresh goldens).
# All three probes: the oracle-* tasks ship golden_patch.py (one solves, one half-solves, one's
# reward reads the wrong path: dropped oracle_fails); the vandal-* rewards pay for removed or
# garbled files (dropped reward_passes_vandalism); delete-the-file passes only `remove` (kept, flagged).
PROBE=("$S" probe demo --image "$IMAGE" --triage "$OUT/triage.json" --receipt "$OUT/receipt.json"
  --run-dir "$OUT/probe-run" --replay demo/solutions.jsonl --concurrency 3 --probes noop,oracle,vandal)
# Exit 1: some tasks met an infrastructure failure (a loaded machine: a desktop slow to come up),
# which settles nothing; the run resumes, so one more pass probes just those tasks.
"${PROBE[@]}" || { rc=$?; [ "$rc" = 1 ] || exit "$rc"; "${PROBE[@]}"; }
# The demo tasks were written for this repository and carry its license.
"$S" make-workspace --dest "$WORKSPACE" --task-root demo --ids "$OUT/receipt.json" \
  --rollouts demo/solutions.jsonl --license Apache-2.0 --image "$IMAGE" --force
if [ -n "${ROLLOUTS:-}" ]; then
  "$S" profile $ROLLOUTS --task-root demo --receipt "$OUT/receipt.json" --out "$OUT/profile"
fi
PROFILE=()
[ -f "$OUT/profile/profile.json" ] && PROFILE=(--profile "$OUT/profile")
"$S" report --triage "$OUT/triage.json" --receipt "$OUT/receipt.json" "${PROFILE[@]}" \
  --html "$OUT/report.html" --md "$OUT/report.md" --tasks "$OUT/tasks"   # open out/demo/tasks/index.html
# The demo bundles are the project's own (Apache-2.0); a downloaded release carries its license.
"$S" publish --repo-id "${PUBLISH_REPO:-shinken-demo/cua-gym-demo}" --receipt "$OUT/receipt.json" \
  --triage "$OUT/triage.json" "${PROFILE[@]}" --task-root demo --license apache-2.0 --local-dir "$OUT/publish"
