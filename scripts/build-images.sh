#!/usr/bin/env bash
# Build (or find cached) the sandbox images for CI: make sure Docker answers, then
# `shinken image build all`. Images are cached by content hash, so on a machine that built
# them before this takes about a second. Pass a CA bundle for pip with SHINKEN_CA_BUNDLE=path
# (default: the host's /etc/ssl/certs/ca-certificates.crt when present).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/ensure-docker.sh"
shinken=${SHINKEN:-$here/.venv/bin/shinken}
if [ ! -x "$shinken" ]; then shinken=$(command -v shinken || true); fi
if [ -z "$shinken" ]; then
  echo "build-images: no shinken executable (run scripts/setup.sh first)" >&2; exit 2
fi
exec "$shinken" image build "${1:-all}"
