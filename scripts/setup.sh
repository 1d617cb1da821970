#!/usr/bin/env bash
# Set up a fresh machine for Proctor: Docker engine, debootstrap, the package, the sandbox image.
# Idempotent: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/provision-docker.sh

# debootstrap: the offline sandbox base image; bubblewrap: the local sandbox backend; git: the
# per-task single-commit repository archive is built on the host; chromium and its driver:
# the tests open the HTML report in a real browser.
for pkg in debootstrap:debootstrap bubblewrap:bwrap git:git chromium:chromium \
           chromium-driver:chromedriver; do
  name=${pkg%%:*} cmd=${pkg##*:}
  if ! command -v "$cmd" >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "[setup] installing $name" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$name" >/dev/null \
      || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$name" >/dev/null; }
  fi
done

# Installed, and from this checkout (asked from outside the repo: its own directory would
# be importable from here whatever is installed).
installed=$(cd / && python3 -c "import os, proctor, pytest, typer, ray, starlette, uvicorn, prometheus_client, plotly, selenium
print(os.path.dirname(os.path.dirname(os.path.realpath(proctor.__file__))))" 2>/dev/null || true)
if [ "$installed" != "$(pwd -P)" ] || [ ! -f .proctor-installed ] \
   || [ pyproject.toml -nt .proctor-installed ]; then
  echo "[setup] pip install -e .[dev,ray,serve,report]" >&2
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[dev,ray,serve,report]' 2>&1 \
    | grep -v '^WARNING: Location' || true
  python3 -c "import proctor"
  command -v pyenv >/dev/null && pyenv rehash 2>/dev/null || true
  touch .proctor-installed
fi

# Proctor's bytecode, written here once (compileall skips what is up to date): where the
# environment sets PYTHONDONTWRITEBYTECODE (or the checkout is read-only), every process
# that imports Proctor (each `proctor` command, Ray worker, test subprocess) would otherwise
# compile its modules from source again (~0.12 s of CPU for `proctor score`'s imports).
python3 -m compileall -q proctor >/dev/null
python3 -m proctor image build >/dev/null
echo "[setup] ready: sandbox image $(python3 -m proctor image build 2>/dev/null)" >&2
