#!/usr/bin/env bash
# Make sure nginx exists: tests/integration/test_nginx_bucket.py measures the limiter against its
# limit_req (a bucket sweeper did not write). Prints the binary's path.
set -euo pipefail
if [ -n "${SWEEPER_NGINX:-}" ]; then echo "$SWEEPER_NGINX"; exit 0; fi
for candidate in "$(command -v nginx || true)" /usr/sbin/nginx; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then echo "$candidate"; exit 0; fi
done
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing nginx (apt-get)" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
  echo /usr/sbin/nginx
  exit 0
fi
echo "nginx is needed by the nginx measurement test: install your distribution's nginx package" >&2
echo "or set SWEEPER_NGINX to its binary." >&2
exit 1
