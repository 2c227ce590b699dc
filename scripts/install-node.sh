#!/usr/bin/env bash
# Installs the npm dependencies when package-lock.json changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=node_modules/.berth-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "berth: installing npm dependencies (about 1 minute; better-sqlite3 is built from source)" >&2
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi
