#!/usr/bin/env bash
# Make a Docker engine answer on this machine.
# When `docker info` fails: install docker.io with apt (root on Debian), start
# `dockerd --bridge=none --iptables=false` in the background and wait until it answers.
# No network for containers: sandboxes run with network_mode=none.
set -euo pipefail

log() { echo "[provision-docker] $*" >&2; }

if docker info >/dev/null 2>&1; then
  log "engine already answers"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  log "no Docker engine answers and this is not root: start one yourself (sudo dockerd --bridge=none --iptables=false &)"
  exit 1
fi

if ! command -v dockerd >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null 2>&1; then
    log "no dockerd and no apt-get: install a Docker engine for this system by hand"
    exit 1
  fi
  log "installing docker.io with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq docker.io >/dev/null
fi

log "starting dockerd --bridge=none --iptables=false"
mkdir -p /var/log
nohup dockerd --bridge=none --iptables=false --ip6tables=false >/var/log/proctor-dockerd.log 2>&1 &

for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    log "engine answers"
    exit 0
  fi
  sleep 1
done
log "dockerd did not answer within 60 s; see /var/log/proctor-dockerd.log"
tail -n 20 /var/log/proctor-dockerd.log >&2 || true
exit 1
