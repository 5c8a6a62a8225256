# shinken/hub-node: Node.js from Debian trixie (Node 20.19: CUA-Gym-Hub's apps that lock
# Vite 7 or 8 need Node >= 20.19; the Vite 4-6 apps run on it too), npm 10 from the npm
# registry (pinned by version and integrity, copied in as npm.tgz: it starts 2.5-3.5x faster
# than Debian's npm 9, which stays as /usr/bin/npm) and the `hub` user the mock apps run as.
# Every app image and the hub image start FROM it, so it is built once per base image.
# BASE_IMAGE is the debootstrapped shinken/base-trixie.
ARG BASE_IMAGE=shinken/base-trixie:latest
FROM ${BASE_IMAGE}
ARG NPM_VERSION
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 LC_ALL=C.UTF-8
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
 && node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<20||(a===20&&b<19)) { console.error("error: Node "+process.version+" from the mirror; the hub needs >= 20.19"); process.exit(1) }'
COPY npm.tgz /tmp/npm.tgz
RUN mkdir -p /usr/local/lib/node_modules/npm \
 && tar -xzf /tmp/npm.tgz -C /usr/local/lib/node_modules/npm --strip-components=1 --no-same-owner \
 && rm /tmp/npm.tgz \
 && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && test "$(npm --version)" = "$NPM_VERSION" || { echo "error: npm on PATH is $(npm --version), not $NPM_VERSION" >&2; exit 1; }
RUN useradd --create-home --uid 1000 --shell /bin/bash hub \
 && mkdir -p /hub/apps \
 && chown hub:hub /hub /hub/apps
