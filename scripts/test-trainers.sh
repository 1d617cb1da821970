#!/usr/bin/env bash
# Tests with the real trainer frameworks: tests/trainers/ run by the python of each cached venv.
#
#   bash scripts/test-trainers.sh [--prepare] [NAME...] [-- PYTEST_ARGS...]
#
# --prepare: only build (or check) the venvs, run no test; .ci/run does it in the background
# while the main suite runs, so a fresh machine's venv builds (~4.5 min) cost no wall time.
#
# NAME is a requirements file under scripts/trainers/ (default: all of them, i.e. trl-verl and
# openrlhf). Each gets a venv ${PROCTOR_TRAINER_VENVS:-~/.cache/proctor/trainer-venvs}/NAME-HASH,
# HASH being the sha256 of what the venv is built from (the torch pin, the Python version,
# Proctor's dependencies, the NAME*.txt files): an unchanged venv is reused, a change builds a
# new one. Build order: torch==2.13.0 first (the CPU build lying on this disk; any other torch
# spec pulls CUDA builds of GBs), then NAME.txt, then NAME.nodeps.txt with --no-deps (packages
# whose declared dependencies cannot install on CPU), then Proctor itself (editable, with its serve extra,
# constrained to the versions already installed), then `pip check` and a check that torch is
# still the CPU 2.13.0.
#
# The venvs are checked (or built) one after the other; their tests then run side by side, each
# into a log of its own, printed in turn once it ends.
#
# Tests run with cwd = the repository and --rootdir on it, so our tests/ (no package: modules are
# imported by file name) wins over the top-level `tests` package that verl and OpenRLHF install.
# Needs Docker and the sandbox image (scripts/setup.sh), as the main suite.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${PROCTOR_TRAINER_VENVS:-$HOME/.cache/proctor/trainer-venvs}
base_python=${PROCTOR_TRAINER_PYTHON:-python3}
torch_pin="torch==2.13.0"

prepare=0
if [[ ${1:-} == "--prepare" ]]; then prepare=1; shift; fi
names=()
while [[ $# -gt 0 && $1 != "--" ]]; do names+=("$1"); shift; done
[[ ${1:-} == "--" ]] && shift
if [[ ${#names[@]} -eq 0 ]]; then
  for f in "$repo"/scripts/trainers/*.txt; do
    case $f in *.nodeps.txt) ;; *) names+=("$(basename "$f" .txt)") ;; esac
  done
fi

# The machine's cores are shared: everything below (pip builds, the tests) runs niced.
renice -n 10 $$ >/dev/null

log() { printf '[test-trainers] %s\n' "$*" >&2; }

pip_() {  # PYTHON ARGS...: pip, quiet, without the machine's notes on absent local indexes
  local py=$1; shift
  "$py" -m pip "$@" 2> >(grep -v "^WARNING: Location 'file://" >&2)
}

build_venv() {  # NAME VENV
  local name=$1 venv=$2 dir="$repo/scripts/trainers" py nodeps=""
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$base_python" -m venv "$venv"
  py=$venv/bin/python
  pip_ "$py" install -q --upgrade "pip>=24"
  pip_ "$py" install -q "$torch_pin"
  pip_ "$py" install -q -r "$dir/$name.txt"
  if [[ -f $dir/$name.nodeps.txt ]]; then
    pip_ "$py" install -q --no-deps -r "$dir/$name.nodeps.txt"
    nodeps=$(grep -v '^\s*#' "$dir/$name.nodeps.txt" | sed 's/[=<>!~ ;].*//' | tr 'A-Z_' 'a-z-')
  fi
  # Proctor with its serve extra, constrained to what is installed: it may add packages but
  # never change a version the frameworks were installed with.
  "$py" -m pip freeze --exclude-editable | grep -v ' @ ' >"$venv/frameworks.freeze"
  pip_ "$py" install -q -c "$venv/frameworks.freeze" -e "$repo[serve]"
  # pip check: every conflict fails the build, except a dependency not installed that a
  # package of NAME.nodeps.txt declares (left out on purpose, see that file).
  local problems
  problems=$("$py" -m pip check 2>&1 | grep -v '^No broken requirements' || true)
  for pkg in $nodeps; do
    problems=$(grep -iv "^$pkg [^ ]* requires .*, which is not installed\.$" <<<"$problems" || true)
  done
  if [[ -n $problems ]]; then
    log "$name: pip check found conflicts:"; printf '%s\n' "$problems" >&2; return 1
  fi
  "$py" - "$torch_pin" <<'EOF'
import sys

import torch

want = sys.argv[1].split("==")[1]
if torch.__version__.split("+")[0] != want or torch.version.cuda or torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} (cuda {torch.version.cuda}) in the venv, not the CPU "
             f"build {want}: a requirement replaced it")
EOF
  touch "$venv/.proctor-complete"
}

proctor_requirements() {  # what Proctor's own install pulls in (part of the venv hash)
  "$base_python" -c 'import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
print(project["dependencies"], project.get("optional-dependencies", {}).get("serve"))' \
    "$repo/pyproject.toml"
}

prune_stale() {  # NAME CURRENT: remove NAME's other venvs unused for 7 days (not in use now)
  local name=$1 current=$2 dir lock
  for dir in "$root/$name"-*/; do
    dir=${dir%/}
    [[ $dir == "$current" || ! -d $dir ]] && continue
    [[ -n $(find "$dir/.proctor-complete" -mtime -7 2>/dev/null) ]] && continue
    exec {lock}>"$dir.lock"
    if flock -xn "$lock"; then
      log "$name: removing $dir (unused for 7 days)"
      rm -rf "$dir"
    fi
    exec {lock}>&-
  done
}

# NAME VENV: tests/trainers/ by VENV's python (the caller holds VENV's lock, shared)
run_tests() {
  local name=$1 venv=$2 rc=0 start
  prune_stale "$name" "$venv"
  log "$name: running tests/trainers"
  start=$(date +%s)
  # cwd = repo, rootdir = repo: our tests/ is found first (see the header).
  (cd "$repo" && env -u PYTHONSAFEPATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
      HF_DATASETS_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false \
      "$venv/bin/python" -m pytest -p no:cacheprovider --rootdir "$repo" \
      -c "$repo/pyproject.toml" "$repo/tests/trainers" "${pytest_args[@]}") || rc=$?
  log "$name: tests took $(( $(date +%s) - start )) s (exit $rc)"
  return "$rc"
}

pytest_args=("$@")
ready=()  # NAME=VENV pairs whose tests run below
status=0
for name in "${names[@]}"; do
  req=$repo/scripts/trainers/$name.txt
  [[ -f $req ]] || { log "no requirements file $req"; exit 2; }
  hash=$( { echo "$torch_pin"; "$base_python" -c 'import sys; print(sys.version)';
            proctor_requirements;
            cat "$repo"/scripts/trainers/"$name".txt;
            cat "$repo"/scripts/trainers/"$name".nodeps.txt 2>/dev/null || true; } \
          | sha256sum | cut -c1-16)
  venv=$root/$name-$hash
  mkdir -p "$root"
  # Exclusive while the venv is checked or built, shared while tests use it: concurrent runs
  # never build the same venv twice nor remove one in use.
  exec {lock}>"$venv.lock"
  flock -x "$lock"
  if [[ -f $venv/.proctor-complete ]]; then
    log "$name: reusing $venv"
    # the editable Proctor of a venv built from another checkout points there: this one
    installed=$(cd / && "$venv/bin/python" -c 'import proctor, pathlib
print(pathlib.Path(proctor.__file__).resolve().parents[1])' 2>/dev/null || true)
    if [[ $installed != "$repo" ]]; then
      log "$name: Proctor installed from ${installed:-nowhere}: installing $repo"
      pip_ "$venv/bin/python" install -q --no-deps -e "$repo"
    fi
  else
    log "$name: building $venv"
    start=$(date +%s)
    build_venv "$name" "$venv"
    log "$name: venv built in $(( $(date +%s) - start )) s"
  fi
  touch "$venv/.proctor-complete"
  if (( prepare )); then
    exec {lock}>&-
    log "$name: venv ready"
    continue
  fi
  flock -s "$lock"  # kept (the fd stays open) until the tests below are done
  ready+=("$name=$venv")
done
(( prepare )) && exit 0
# The venvs' tests run side by side, each into a log of its own, shown in turn: one after
# the other they keep ~1.2 of 2 cores busy (98 s; side by side 71 s).
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for pair in "${ready[@]}"; do
  run_tests "${pair%%=*}" "${pair#*=}" >"$logs/${pair%%=*}" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  pair=${ready[$i]}
  cat "$logs/${pair%%=*}"
  (( rc > status )) && status=$rc
done
exit $status
