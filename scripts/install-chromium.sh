#!/usr/bin/env bash
# The browser tests drive Debian's chromium (Playwright's own browser download does not work here).
set -euo pipefail
command -v chromium >/dev/null && exit 0
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
chromium --version
