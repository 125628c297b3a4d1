#!/usr/bin/env bash
# Re-create the Ray captures under tests/data/formats/ from a running ray_target.py.
# Usage: capture_ray.sh DRIVER_PID RAYLET_PID   (the isolated test cluster's raylet; see README.md)
# `ray stack` calls sudo, absent here: a shim that only runs its arguments is put on PATH.
set -euo pipefail
driver=$1 raylet=$2
here=$(cd "$(dirname "$0")" && pwd)
out=$(dirname "$here")
mkdir -p "$out/ray" "$out/ray-stack" "$out/dashboard"
pids() { ps -o pid= --ppid "$raylet" | tr -d ' '; }
title() { tr '\0' ' ' < "/proc/$1/cmdline" | sed 's/ *$//'; }
py-spy dump --pid "$driver" > "$out/ray/driver.txt"
py-spy dump --pid "$driver" --json > "$out/ray/driver.json"
for pid in $(pids); do
  t=$(title "$pid")
  case "$t" in
    ray::Rank.train_step|ray::_QueueActor.get|ray::Poller.poll|ray::Threaded.*|ray::prefetch|ray::IDLE|ray::Holder.hold) ;;
    *) continue ;;
  esac
  name=$(echo "${t#ray::}" | tr -c 'A-Za-z0-9_.\n' '_')-$pid
  py-spy dump --pid "$pid" > "$out/ray/$name.txt" || true
  py-spy dump --pid "$pid" --json > "$out/ray/$name.json" || true
done
# One worker with native frames and locals, as `ray stack` and `--locals` show it.
first=$(for p in $(pids); do if [ "$(title "$p")" = "ray::Rank.train_step" ]; then echo "$p"; fi; done | sed -n 1p)
py-spy dump --pid "$first" --native > "$out/ray/Rank.train_step-native.txt"
py-spy dump --pid "$first" --locals > "$out/ray/Rank.train_step-locals.txt"
shim=$(mktemp -d)
printf '#!/bin/sh\nexec "$@"\n' > "$shim/sudo"; chmod +x "$shim/sudo"
PATH="$shim:$PATH" ray stack > "$out/ray-stack/ray_stack.txt" 2>&1 || true
rm -rf "$shim"
# The dashboard's stack view (Workers -> Stack Trace) is py-spy text served over HTTP.
curl -s "http://127.0.0.1:8291/worker/traceback?pid=$first&ip=127.0.0.1&native=0" \
  > "$out/dashboard/worker_traceback.txt"
