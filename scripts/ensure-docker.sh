#!/usr/bin/env bash
# Make sure a Docker engine answers. CI and fresh machines start without one, so
# install docker.io (Debian) and start dockerd as root when needed. Fails loudly:
# tests that need Docker must never be skipped silently.
set -euo pipefail
if docker info >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "shinken: Docker is not running and this is not root; start dockerd yourself" >&2; exit 1
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "shinken: installing docker.io ..." >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi
log=/var/log/shinken-dockerd.log
nohup dockerd >"$log" 2>&1 &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then exit 0; fi
  sleep 1
done
echo "shinken: dockerd did not answer within 60 s; see $log" >&2
tail -20 "$log" >&2 || true
exit 1
