#!/usr/bin/env bash
# Set up a fresh machine for Proctor: Docker engine, debootstrap, the package, the sandbox image.
# Idempotent: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/provision-docker.sh

if ! command -v debootstrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "[setup] installing debootstrap (offline sandbox base image)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null \
    || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
fi

if ! command -v bwrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "[setup] installing bubblewrap (local sandbox backend)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null \
    || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }
fi

if ! python3 -c "import proctor, pytest, typer" >/dev/null 2>&1 || [ ! -f .proctor-installed ] \
   || [ pyproject.toml -nt .proctor-installed ]; then
  echo "[setup] pip install -e .[dev]" >&2
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[dev]' 2>&1 \
    | grep -v '^WARNING: Location' || true
  python3 -c "import proctor"
  command -v pyenv >/dev/null && pyenv rehash 2>/dev/null || true
  touch .proctor-installed
fi

python3 -m proctor image build >/dev/null
echo "[setup] ready: sandbox image $(python3 -m proctor image build 2>/dev/null)" >&2
