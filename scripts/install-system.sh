#!/usr/bin/env bash
# Installs the Debian packages Berth and its tests need, only those that are missing.
# Engines: Chromium (PDF, screenshots), LibreOffice (office → PDF, jailed by bubblewrap), PostgreSQL 15, MariaDB and Redis
# (managed databases, and the test store), lz4 and tar (base backups and clones), qpdf and poppler-utils
# (test oracles for PDFs).
set -euo pipefail

PACKAGES=(
  chromium fonts-liberation
  libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui python3-uno bubblewrap
  postgresql-15 mariadb-server mariadb-client redis-server
  qpdf poppler-utils
  lz4 tar
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "berth: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
# Package scripts must not start system-wide servers: Berth starts its own on free loopback ports.
printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
$SUDO chmod +x /usr/sbin/policy-rc.d
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
$SUDO rm -f /usr/sbin/policy-rc.d
