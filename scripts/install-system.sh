#!/usr/bin/env bash
# Installs the Debian packages Berth and its tests need, only those that are missing.
# Engines: Chromium (PDF, screenshots) with fonts for Latin, CJK and emoji, LibreOffice (office → PDF, jailed by bubblewrap), PostgreSQL 15, MariaDB and Redis
# (managed databases, and the test store), lz4 and tar (base backups and clones), qpdf and poppler-utils
# (test oracles for PDFs).
# Application runtime: git (sources), bubblewrap (sandbox), nginx-light and PHP 8.2 FPM with common
# extensions (laravel and wordpress; php8.2-amqp for queues on a rabbitmq service), Debian's wordpress
# with a default theme (a wordpress application
# without a repository).
# Edge: haproxy (BERTH_EDGE_PROXY=haproxy; Berth starts its own process, never the system service).
# Network: nftables and iproute2 (as root each application gets a network namespace, a veth pair and
# rules in one nftables table per Berth; docs/runtime.md).
# Application services: rabbitmq-server (a `rabbitmq` service: Berth starts one node per service with
# its own epmd on free loopback ports, never the system service); e2fsprogs and mount (a service's
# volume_size: an ext4 image, loop-mounted).
# Tests of the s3 driver's https upstream: openssl (a self-signed certificate).
# Kubernetes tests: etcd-server (the test control plane's store; scripts/install-kubernetes-testenv.sh
# builds the control plane itself, with its build-only packages; docs/testing-kubernetes.md).
set -euo pipefail

PACKAGES=(
  chromium fonts-liberation fonts-noto-cjk fonts-noto-color-emoji
  libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui python3-uno bubblewrap
  postgresql-15 mariadb-server mariadb-client redis-server
  qpdf poppler-utils zip
  lz4 tar
  util-linux e2fsprogs mount
  git nginx-light php8.2-fpm php8.2-cli php8.2-mysql php8.2-pgsql php8.2-sqlite3 php8.2-mbstring
  php8.2-xml php8.2-curl php8.2-intl php8.2-gd php8.2-zip php8.2-bcmath php8.2-redis php8.2-amqp
  wordpress wordpress-theme-twentytwentythree
  haproxy
  rabbitmq-server
  nftables iproute2
  etcd-server
  openssl
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "berth: installing ${#missing[@]} Debian packages: ${missing[*]}" >&2
echo "berth: on a fresh machine this downloads about 400 MB and takes 2 to 5 minutes; each package is named as it is set up" >&2
echo "berth: apt-get update" >&2
$SUDO apt-get update -qq
# Package scripts must not start system-wide servers: Berth starts its own on free loopback ports.
printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
$SUDO chmod +x /usr/sbin/policy-rc.d
started=$SECONDS
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" |
  { grep --line-buffered -E '^(Setting up|Get:[0-9]+ )' || true; } |
  sed -u -E 's/^Get:[0-9]+ [^ ]+ [^ ]+ [^ ]+ ([^ ]+) .*/berth:   downloading \1/; s/^Setting up ([^ ]+).*/berth:   set up \1/' >&2
$SUDO rm -f /usr/sbin/policy-rc.d
# haproxy's and rabbitmq-server's packages enable a system-wide service for the next boot: Berth runs
# its own HAProxy and its own RabbitMQ nodes.
for service in haproxy rabbitmq-server; do
  dpkg-query -W -f='${Status}' "$service" 2>/dev/null | grep -q "install ok installed" || continue
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    $SUDO systemctl disable --now "$service.service" >/dev/null 2>&1 || true
  else
    $SUDO rm -f "/etc/systemd/system/multi-user.target.wants/$service.service"
  fi
  $SUDO update-rc.d "$service" disable >/dev/null 2>&1 || true
  [ -x "/etc/init.d/$service" ] && $SUDO "/etc/init.d/$service" stop >/dev/null 2>&1 || true
done
echo "berth: Debian packages installed in $((SECONDS - started)) s" >&2
