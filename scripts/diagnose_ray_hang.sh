#!/usr/bin/env bash
# Diagnose why a Ray job hangs, end to end. Usage: diagnose_ray_hang.sh [ADDRESS] [OUTPUT_DIR] [--job-id ID] [options]
#   ADDRESS     GCS address host[:port]; default $RAY_ADDRESS; port 6379 when omitted
#   OUTPUT_DIR  new or empty; default a new private /tmp/ray_hang_diag_XXXXXXXX (printed)
# Leaves report.md, diagnosis.json and the phase outputs in OUTPUT_DIR; prints the report path and
# a summary. Exit 0 when a diagnosis was produced (hang or not); see --help for the other codes.
# Runs from a plain checkout: needs only python3 with ray[default], py-spy and pyyaml.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${DEBUG_HANG_PYTHON:-}"
if [ -z "$python" ]; then
  for candidate in python3 python; do
    if command -v "$candidate" >/dev/null 2>&1; then python="$candidate"; break; fi
  done
fi
if [ -z "$python" ]; then
  echo "diagnose_ray_hang.sh: error: no python3 on PATH (set DEBUG_HANG_PYTHON)" >&2
  exit 2
fi
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
# Python 3.11+: never import a `debug_hang` that happens to sit in the current folder (-m puts it first).
export PYTHONSAFEPATH=1
# DEBUG_HANG_SCRIPT: how to spell this command again in a message (a refused folder's next command)
DEBUG_HANG_SCRIPT="$0" exec "$python" -m debug_hang diagnose "$@"
