#!/usr/bin/env bash
# Install the few system packages the app needs when they are missing:
#   build        what creating the virtual environment needs (venv/ensurepip, and a C compiler with
#                Python headers so owlready2 can compile its fast RDF parser)
#   runtime|test the libraries Qt needs;  screenshots  the same plus Xvfb
#   real-model   what building llama-cpp-python needs (a C++ compiler and cmake), for scripts/real_model.sh
# Runs apt-get only as root on Debian/Ubuntu; otherwise it names what to install and goes on.
set -euo pipefail
what="${1:-runtime}"
missing=()
if [ "$what" = "build" ]; then
  py="${PYTHON:-python3}"
  ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  "$py" -c 'import ensurepip, venv' 2>/dev/null || missing+=("python3-venv" "python${ver}-venv")
  "$py" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || missing+=("python3-dev" "python${ver}-dev")
  command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
  pkgs=()
elif [ "$what" = "real-model" ]; then
  command -v g++ >/dev/null 2>&1 || command -v c++ >/dev/null 2>&1 || missing+=(g++)
  command -v cmake >/dev/null 2>&1 || missing+=(cmake)
  pkgs=()
else
  pkgs=(libegl1 libgl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libdbus-1-3 libglib2.0-0
        libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-cursor0 libxcb-xinerama0
        libxcb-randr0 libxcb-shape0 libxcb-xkb1)
fi
if [ "$what" = "screenshots" ]; then pkgs+=(xvfb xauth); fi
if command -v dpkg-query >/dev/null 2>&1; then
  for p in ${pkgs[@]+"${pkgs[@]}"}; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || echo "Note: apt-get could not install all of: ${missing[*]}; install them by hand" >&2
else
  echo "Note: these system packages are missing (install them with your package manager): ${missing[*]}" >&2
fi
