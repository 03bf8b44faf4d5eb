#!/usr/bin/env bash
# Install Debian's chromium, which the browser tests drive; CI (.ci/run) and the README's test setup run it.
# Playwright's own browser download does not work here.
set -euo pipefail
command -v chromium >/dev/null && exit 0
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
chromium --version
