#!/usr/bin/env bash
# Quick start, command 2: install what is missing and run every check and the whole test suite,
# on SQLite and on PostgreSQL (the suite starts its own PostgreSQL 15 unless BERTH_TEST_DATABASE_URL is set),
# then the dashboard's browser tests (Playwright, the system Chromium, one real Berth per dialect).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system.sh
bash scripts/install-node.sh
. scripts/node-env.sh
npm run --silent typecheck
npm run --silent lint
npm run --silent format:check
npm run --silent build
npx vitest run "$@"
npx playwright test
