#!/usr/bin/env bash
# Installs the Debian packages Deltafin builds and tests with. Idempotent: skips
# what is present. Needs root (or sudo) on Debian 12.
set -euo pipefail
pkgs=(cmake g++ make pkg-config git
      libhwy-dev libpcre2-dev libicu-dev nlohmann-json3-dev libxxhash-dev liburing-dev
      libssl-dev libcurl4-openssl-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
      libboost-dev python3 python3-jinja2 libedit-dev
      clang libclang-rt-dev  # libFuzzer + ASan/UBSan runtimes: tests/e2e/fuzz_parsers.sh
      chromium)  # the web chat test (tests/e2e/web_chat.sh) drives it headless
# Node.js may come from another source (it bundles npm); only ask Debian when absent.
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
if [[ "${DELTAFIN_WITH_TORCH:-0}" == 1 ]]; then pkgs+=(python3-torch python3-numpy python3-regex); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "bootstrap: all packages present"
fi
