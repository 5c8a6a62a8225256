# shinken/hub-node: Node.js and npm from Debian trixie (Node 20.19: CUA-Gym-Hub's apps that lock
# Vite 7 or 8 need Node >= 20.19; the Vite 4-6 apps run on it too) and the `hub` user the mock
# apps run as. Every app image and the hub image start FROM it, so it is built once per base
# image. BASE_IMAGE is the debootstrapped shinken/base-trixie.
ARG BASE_IMAGE=shinken/base-trixie:latest
FROM ${BASE_IMAGE}
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 LC_ALL=C.UTF-8
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
 && node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<20||(a===20&&b<19)) { console.error("error: Node "+process.version+" from the mirror; the hub needs >= 20.19"); process.exit(1) }'
RUN useradd --create-home --uid 1000 --shell /bin/bash hub \
 && mkdir -p /hub/apps \
 && chown hub:hub /hub /hub/apps
