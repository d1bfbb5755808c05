# Terminus: one image for every replica. Build: docker build -t terminus .
# The current Node LTS (26; @medplum 5.2 needs 22.18+), pinned: a rebuild gets the same runtime.
FROM node:26.10.0-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm ci --no-audit --no-fund && npm prune --omit=dev

FROM node:26.10.0-bookworm-slim
# Production: the container refuses to start without CARD_TRUST_ANCHORS (a mounted PEM file) and
# GUARD_KEY_SECRET (32+ characters); see docker-compose.yml.
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The practice page's files (terminus-client ui), served as they are: no build step for them.
COPY --from=build /app/src/client/ui/public ./src/client/ui/public
COPY package.json ./
COPY migrations ./migrations
COPY fhir-profiles ./fhir-profiles
COPY policies ./policies
COPY proto ./proto
COPY subscriptions ./subscriptions
COPY fixtures ./fixtures
# Shipped trust anchors (Apple's App Attestation root; PLATFORM_A_TRUST_ANCHORS replaces it).
COPY deploy/trust ./deploy/trust
# DATA_DIR in production: the last good TSL (a volume mounted here takes this owner).
RUN mkdir -p /home/node/data && chown node:node /home/node/data
USER node
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "fetch('http://127.0.0.1:8080/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "dist/src/main.js", "serve"]
