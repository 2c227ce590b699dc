#!/bin/sh
# Ceph's s3-tests against Berth's S3 endpoint (not run in CI). See docs/benchmarks/s3-compatibility.md.
# Usage: scripts/s3-compat.sh /work/s3-tests [pytest arguments, e.g. s3tests/functional/test_s3.py -k list]
set -eu
cd "$(dirname "$0")/.."
exec npx tsx scripts/s3-compat.ts "$@"
