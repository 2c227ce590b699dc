#!/usr/bin/env bash
# Quick start, command 2: install what is missing and run every check and the whole test suite,
# on SQLite and on PostgreSQL (the suite starts its own PostgreSQL 15 unless BERTH_TEST_DATABASE_URL is set),
# then the dashboard's browser tests (Playwright, the system Chromium, one real Berth per dialect).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system.sh
bash scripts/install-node.sh
# The Kubernetes tests' control plane: built once (about 10 minutes cold), then a no-op.
bash scripts/install-kubernetes-testenv.sh
. scripts/node-env.sh
# Typecheck, lint, format check and build are independent and each one single-threaded: side by side
# they use every core. Each one's output is shown when all have ended; any failure fails the script.
# The typecheck checks src, so the build only emits it (build:emit, tsc --noCheck) and bundles the
# dashboard.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
checks=(typecheck lint format:check build:emit)
for check in "${checks[@]}"; do
  (npm run --silent "$check" >"$logs/$check" 2>&1 && echo 0 >"$logs/$check.rc" || echo 1 >"$logs/$check.rc") &
done
wait
failed=()
for check in "${checks[@]}"; do
  cat "$logs/$check"
  [ "$(cat "$logs/$check.rc")" = 0 ] || failed+=("$check")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
npx vitest run "$@"
npx playwright test
