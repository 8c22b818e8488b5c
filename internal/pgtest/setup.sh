#!/usr/bin/env bash
# Installs Debian's PostgreSQL server binaries when they are missing, for
# the tests that run a throw-away cluster (internal/pgtest). It needs root
# because it uses apt-get; it starts no service (the tests run their own
# cluster with initdb in a temporary directory). Idempotent.
set -euo pipefail
if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "pgtest/setup: PostgreSQL present" >&2
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "pgtest/setup: PostgreSQL is missing and installing it needs root (apt-get install postgresql)" >&2
  exit 1
fi
echo "pgtest/setup: installing postgresql (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends postgresql >&2
# The package may start a cluster of its own; the tests do not use it.
