# syntax=docker/dockerfile:1
# envoy-injector: the admission webhook, compiled, on distroless Node.js 24 (LTS,
# maintained until 2028-04-30). Both stages name the same line, the one CI runs
# the unit tier on (test/helpers/lts-node.ts; test/dockerfile.test.ts checks).
# test/dockerfile.test.ts runs these steps locally (no Docker engine needed)
# so they cannot rot: keep RUN lines to plain `npm` commands.

# Build: every dependency, then `tsc` into dist/ and the bundle into
# dist/bundle/ (scripts/bundle.ts). --ignore-scripts because the `prepare`
# script (npm run build) would run before the sources are copied.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build

# Runtime: no shell, no package manager, nonroot user 65532. The bundle holds
# every runtime dependency, so the image carries no node_modules.
FROM gcr.io/distroless/nodejs24-debian12:nonroot
WORKDIR /app
ENV NODE_ENV=production
# glibc's malloc keeps its default threshold (128 KiB) for serving large blocks
# from mmap, instead of raising it to the largest block freed: once raised, the
# megabytes V8 and the module loader allocate and free while loading the
# bundle stay in the heap for the life of the process. Measured by the bench
# (issue 39): RSS at rest in a cluster 76-82 -> 68-71 MiB. `npm start` and the
# bench run ours with it too (test/dockerfile.test.ts checks).
ENV MALLOC_MMAP_THRESHOLD_=131072
COPY --from=build /app/dist/bundle ./dist/bundle
COPY bin ./bin
COPY package.json ./
USER 65532:65532
EXPOSE 8443
# Settings come from the environment (PORT, POD_NAMESPACE, CERT_MODE, ...): see the chart.
# --max-semi-space-size=8 (MiB; V8's default grows to 16): V8's young generation
# is most of the peak with ~1 MiB Pods. Measured by the bench (on Node 20): peak
# 204-223 -> 173-175 MiB there, 3-8 % more CPU per 1 MiB Pod, the seed unchanged
# within noise. --heap-growing-percent=100: V8 lets the old generation grow
# to twice what survived the last full GC (its own factor goes up to 4), so
# the garbage of ~1 MiB Pods is collected sooner: peak there 140-172 -> 117-124
# MiB (issue 39, 4 runs each on a loaded machine), ~3x the full GCs with such
# Pods (3-5 -> 15-16 per 600 reviews, +0.3 ms of pauses per review), none more
# on the seed. `npm start` and the bench run ours with these same flags
# (test/dockerfile.test.ts checks).
ENTRYPOINT ["/nodejs/bin/node", "--max-semi-space-size=8", "--heap-growing-percent=100", "bin/envoy-injector.js", "serve"]
