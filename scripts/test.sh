#!/usr/bin/env bash
# Run the whole test suite against a real Docker engine (started if needed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/typecheck.sh  # the substrate (sandbox/, probes/, computer/) is typed end to end
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then echo "shinken: pytest collected no tests" >&2; exit 1; fi
exit "$rc"
