#!/usr/bin/env bash
# The whole test suite on a fresh machine: set up (Docker, image), then pytest.
#
# Two pytest workers (pytest-xdist): most of the slow tests wait on timeouts (a hanging test,
# a hanging build), not on the CPU. Each worker is its own process with its own cache dir,
# temp dir and container owner label (tests/conftest.py). The tests marked ``serial`` change
# or assert machine-wide state (e.g. prune every task image), so they run afterwards, alone.
# ``python3 -m pytest -q`` alone still runs everything in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
rc=0
python3 -m pytest -q -n "${PROCTOR_TEST_WORKERS:-2}" --dist worksteal -m "not serial" "$@" \
  || rc=$?
serial_rc=0
python3 -m pytest -q -m serial "$@" || serial_rc=$?
exit $((rc != 0 ? rc : serial_rc))  # both parts run; the first failure's status
