# The production image of the App, its workers and the run server: one image, three commands
#   App:         docker run … issue-agent            (the default: dist/src/app/main.js)
#   worker:      docker run … issue-agent dist/workers/main.js
#   run server:  docker run … issue-agent dist/src/server/main.js
# See docs/self-hosting.md for what each needs (Redis, the Docker engine for workers, volumes).
#
# BASE_IMAGE is a bare Debian bookworm root: `issue-agent/base-raw`, built offline by
# scripts/build-images.sh (debootstrap + docker import), or `debian:bookworm-slim` where a registry
# is reachable. NODE_IMAGE supplies the Node binary and npm for the build: `issue-agent/node:24`
# (scripts/build-images.sh), the same Node the Action runs on.
# scripts/build-app-image.sh builds it with the host network and the deployment's extra CA
# certificates (a TLS-inspecting proxy), which reach the build stage only.
ARG BASE_IMAGE=issue-agent/base-raw:latest
ARG NODE_IMAGE=issue-agent/node:24

FROM ${NODE_IMAGE} AS build
USER root
WORKDIR /build
# .extra-ca.pem is written by scripts/build-app-image.sh when the build needs extra CAs; the
# wildcard lets a plain `docker build .` work without it.
COPY package.json package-lock.json .extra-ca*.pem ./
RUN set -eu; \
    if [ -f .extra-ca.pem ]; then export NODE_EXTRA_CA_CERTS=/build/.extra-ca.pem; fi; \
    npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build-web.ts scripts/build-bundles.mjs scripts/
COPY src src
COPY workers workers
COPY bin bin
RUN set -eu; \
    npm run build; \
    npm prune --omit=dev --no-audit --no-fund --ignore-scripts; \
    rm -f .extra-ca.pem

FROM ${NODE_IMAGE} AS node

FROM ${BASE_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
# git: the worker clones, checks and pushes on the host side of the sandbox (hardened, see
# src/git/host-git.ts); tini: PID 1 that reaps; ca-certificates: GitHub and the model API.
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends git ca-certificates tini; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log
COPY --from=node /usr/local/bin/node /usr/local/bin/node
# A fixed non-root uid: volumes and the Docker socket's group are granted to it, nothing else is.
RUN set -eux; \
    groupadd --gid 10001 issue-agent; \
    useradd --uid 10001 --gid 10001 --home-dir /home/issue-agent --create-home --shell /usr/sbin/nologin issue-agent; \
    mkdir -p /var/lib/issue-agent; \
    chown issue-agent:issue-agent /var/lib/issue-agent
WORKDIR /app
# Owned by root and not writable by the service user: the code cannot be changed by the process
# that runs it.
COPY --from=build /build/package.json ./
COPY --from=build /build/node_modules ./node_modules
COPY --from=build /build/dist ./dist
COPY --from=build /build/bin ./bin
COPY app.yml ./
ENV NODE_ENV=production \
    LANG=C.UTF-8 \
    HOME=/home/issue-agent \
    ISSUE_AGENT_WORK_DIR=/var/lib/issue-agent/work \
    ISSUE_AGENT_ENV_CACHE_DIR=/var/lib/issue-agent/env-cache \
    HOST=0.0.0.0 \
    PORT=3000
USER issue-agent
EXPOSE 3000
ENTRYPOINT ["/usr/bin/tini", "--", "node"]
CMD ["dist/src/app/main.js"]
