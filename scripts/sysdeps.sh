#!/usr/bin/env bash
# Install the few system packages Qt needs (and Xvfb for screenshots) when they are missing.
# Runs apt-get only as root on Debian/Ubuntu; otherwise it names what to install and goes on.
set -euo pipefail
what="${1:-runtime}"
pkgs=(libegl1 libgl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libdbus-1-3 libglib2.0-0
      libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-cursor0 libxcb-xinerama0
      libxcb-randr0 libxcb-shape0 libxcb-xkb1)
if [ "$what" = "screenshots" ]; then pkgs+=(xvfb xauth); fi
missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "Note: these system packages are missing (install them with your package manager): ${missing[*]}" >&2
fi
