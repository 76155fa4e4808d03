#!/usr/bin/env bash
# Make sure PostgreSQL server binaries exist for the local stack's disposable cluster.
set -euo pipefail
if [ -n "${DATABASE_URL:-}" ] || [ -n "${SWEEPER_PG_BIN:-}" ]; then exit 0; fi
if command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing PostgreSQL server binaries (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  exit 0
fi
echo "PostgreSQL 15+ server binaries (initdb, postgres) are needed: install your distribution's" >&2
echo "postgresql package, set SWEEPER_PG_BIN to their folder, or set DATABASE_URL." >&2
exit 1
