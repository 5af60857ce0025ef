# The `sluice` command and this repository's examples in one image, for docker-compose.yml.
# No build step: the CLI runs its TypeScript through tsx, as it does on a developer's machine.
FROM node:20-bookworm-slim
RUN npm install -g pnpm@10.34.8
WORKDIR /app
COPY . .
RUN pnpm install --frozen-lockfile
ENTRYPOINT ["node", "/app/packages/cli/bin/sluice.mjs"]
