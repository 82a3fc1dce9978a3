# Pont: FHIR R4 store with Connect, SDK and Bridge layers.
#   docker build -t pont .
#   docker run -p 8080:8080 -v pont-data:/var/lib/pont --env-file pont.env pont     (embedded PGlite under /var/lib/pont)
#   docker run -p 8080:8080 -e DATABASE_URL=postgres://... --env-file pont.env pont  (PostgreSQL)
# The image runs in production (PONT_ENV=production), which needs its own secrets: pont.env holds
#   PONT_WEBHOOK_SECRET_KEY=<openssl rand -base64 32>  PONT_MATCH_KEY_SECRET=<openssl rand -base64 32>
#   PONT_PUBLIC_URL=https://<the address integrators use>
# A start without them stops with a message naming them. -e PONT_ENV=sandbox runs the sandbox (same secrets).
# docker-compose.yml runs it with PostgreSQL 15.
#
# The build stage compiles the TypeScript (npm run build → dist/, with source maps); the runtime stage holds
# the production dependencies and the compiled output only (no TypeScript, no tsx) and runs as `node`.

ARG NODE_IMAGE=node:22-bookworm-slim

# ---- build: every dependency (the compiler), then dist/
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build

# ---- dependencies: production only, exactly the lockfile's versions
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# argon2 ships prebuilt binaries for linux x64/arm64 (glibc), so no compiler is needed here.
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# ---- runtime
FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    PONT_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    PONT_DATA_DIR=/var/lib/pont \
    LOG_LEVEL=info
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json ./
COPY bin ./bin
# The compiled service: modules, source maps and the SQL migrations beside them.
COPY --from=build /app/dist ./dist
COPY mappings ./mappings
# The Synthea sample the demo reset seeds from.
COPY samples ./samples
# The embedded database's files (unused when DATABASE_URL is set) and the bulk export files (bulk-exports/,
# PONT_BULK_EXPORT_DIR). Owned by the unprivileged `node` user (uid 1000) of the base image, which the service runs as.
RUN mkdir -p /var/lib/pont && chown node:node /var/lib/pont
VOLUME ["/var/lib/pont"]
USER node
EXPOSE 8080
# Ready = the database answers (GET /readyz). The slim image has no curl: Node's fetch does it.
# start-period covers migrations and the FHIR definitions loading at start.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# glibc's malloc keeps up to 8 arenas a core, each holding memory freed into it: two keep the resident set 45-80 MiB
# lower under load, as `npm start` does (docs/operators.md "Deployment", Memory); `docker run -e MALLOC_ARENA_MAX=…` changes it.
ENV MALLOC_ARENA_MAX=2
# Node is PID 1 and handles SIGTERM/SIGINT itself (pont serve closes the server and database).
CMD ["node", "--max-old-space-size=512", "--enable-source-maps", "dist/bin.js", "serve"]
