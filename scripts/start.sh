#!/usr/bin/env bash
# Quick start, command 1: install what is missing, build, and start Berth with its embedded defaults
# (SQLite in ./data, port 8080). Extra arguments go to `berth serve` (see `berth --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system.sh
bash scripts/install-node.sh
. scripts/node-env.sh
echo "berth: building the server (tsc) and the dashboard (vite), about 30 s" >&2
npm run --silent build
exec node dist/cli/index.js serve "$@"
