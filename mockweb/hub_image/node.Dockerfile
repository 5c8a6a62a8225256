# shinken/hub-node: Node.js and npm from Debian (bookworm: Node 18, what CUA-Gym-Hub needs) and
# the `hub` user the mock apps run as. Every app image and the hub image start FROM it, so it
# is built once per base image. BASE_IMAGE is the debootstrapped shinken/base-bookworm.
ARG BASE_IMAGE=shinken/base-bookworm:latest
FROM ${BASE_IMAGE}
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 LC_ALL=C.UTF-8
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
RUN useradd --create-home --uid 1000 --shell /bin/bash hub \
 && mkdir -p /hub/apps \
 && chown hub:hub /hub /hub/apps
