#!/usr/bin/env bash
# Make sure Debian's chromium and its chromedriver exist for the console's browser test
# (tests/integration/test_console_browser.py). The test never skips: without them it fails.
set -euo pipefail
if [ -n "${SWEEPER_CHROMIUM:-}" ] && [ -n "${SWEEPER_CHROMEDRIVER:-}" ]; then exit 0; fi
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing chromium and chromium-driver (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  exit 0
fi
echo "the console's browser test needs chromium and chromedriver: install your distribution's" >&2
echo "chromium and chromium-driver packages, or set SWEEPER_CHROMIUM and SWEEPER_CHROMEDRIVER." >&2
exit 1
