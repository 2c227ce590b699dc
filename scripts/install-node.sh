#!/usr/bin/env bash
# Installs Node.js 24 into .node/ when the host's is older (scripts/node-env.sh), then the npm
# dependencies with it when package-lock.json or the Node.js ABI changed since the last install
# (native modules are built for one ABI). Callers source scripts/node-env.sh afterwards to run on it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/node-env.sh
stamp=node_modules/.berth-lock.sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1) node-abi-$(node -p process.versions.modules)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "berth: installing npm dependencies for Node.js $(node --version) (about 2 minutes; better-sqlite3 and ssh2's modules are built from source)" >&2
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi
