#!/usr/bin/env bash
# The whole test suite on a fresh machine: set up (Docker, image), then pytest.
#
# Two pytest workers (pytest-xdist) for the tests that keep the CPU busy (the sandboxes' own
# work: the suite is CPU-bound on 2 cores). The tests marked ``waits`` spend their time
# waiting on code that sleeps (a hang until its timeout, a slot held on purpose), not on the
# CPU (bench/suite_cpu.py measures both): they run meanwhile in a process of their own, whose
# output is shown after the workers'. Each process and worker has its own cache dir, temp
# dir and container owner label (tests/conftest.py). The tests marked ``serial`` change or
# assert machine-wide state (e.g. prune every task image), so they run afterwards, alone.
# ``python3 -m pytest -q`` alone still runs everything in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
waits_log=$(mktemp)
waits=
# ended whole (its process group) if this script is stopped before it ends
trap '[ -n "$waits" ] && kill -- -"$waits" 2>/dev/null; rm -f "$waits_log"' EXIT
setsid python3 -m pytest -q -p no:cacheprovider -m "waits and not serial" "$@" \
  </dev/null >"$waits_log" 2>&1 &
waits=$!
rc=0
python3 -m pytest -q -n "${PROCTOR_TEST_WORKERS:-2}" --dist worksteal \
  -m "not serial and not waits" "$@" || rc=$?
waits_rc=0
wait "$waits" || waits_rc=$?
waits=
echo "---- the tests that wait (-m waits), beside the workers ----"
cat "$waits_log"
# The serial part collects only the files that mark a test serial (collecting all of them
# takes ~5 s of this part's ~17), unless the arguments name tests themselves.
serial_files=()
only_options=1
for arg in "$@"; do [[ $arg == -* ]] || only_options=0; done
if (( only_options )); then
  mapfile -t serial_files < <(grep -rlE --include='*.py' 'mark\.serial\b' tests | sort)
fi
serial_rc=0
python3 -m pytest -q -m serial "$@" "${serial_files[@]}" || serial_rc=$?
# pytest's 5: the selection left nothing to run in that part
for v in waits_rc serial_rc; do [ "${!v}" -eq 5 ] && printf -v "$v" 0; done
# every part runs; the first failure's status
for status in "$rc" "$waits_rc" "$serial_rc"; do
  [ "$status" -ne 0 ] && exit "$status"
done
exit 0
