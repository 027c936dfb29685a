#!/usr/bin/env bash
# One-step set-up on a fresh Debian/Ubuntu machine: the Fashion-MNIST package
# (unless LAZYLAB_DATA points elsewhere), Debian's chromium and chromedriver for the report's
# browser test, a virtual environment in .venv, and lazylab with its test and Ray extras. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=()
if [ -z "${LAZYLAB_DATA:-}" ] && [ ! -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ]; then
  PKGS+=(dataset-fashion-mnist)
fi
# Debian's chromium and its chromedriver: tests/test_render.py opens the report page in them
# (headless). LAZYLAB_NO_BROWSER=1 skips them (that test then skips, or fails under CI).
if [ -z "${LAZYLAB_NO_BROWSER:-}" ] && { ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; }; then
  PKGS+=(chromium chromium-driver)
fi
if [ ${#PKGS[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${PKGS[@]}"
fi

PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# [ray]: the Ray backend, which tests/test_ray.py runs on a local 2-CPU instance.
.venv/bin/python -m pip install -q -e '.[test,ray]'
# The example plugin (plugins/lazylab-rff): the suite tests plugin loading with it.
.venv/bin/python -m pip install -q -e plugins/lazylab-rff
