#!/usr/bin/env bash
# Set everything up, build the toolz example task and score all its candidate patches.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
task_dir=$(python3 examples/toolz/make_task.py | tail -n 1)
exec python3 examples/toolz/score_candidates.py "$task_dir"
