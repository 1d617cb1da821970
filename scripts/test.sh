#!/usr/bin/env bash
# The whole test suite on a fresh machine: set up (Docker, image), then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec python3 -m pytest -q "$@"
