#!/bin/sh
# Record every capture under tests/data/native/ (README.md there says what each shows).
# Needs: gdb, elfutils (eu-stack), lldb, python3.11-dbg (gdb's py-bt for /usr/bin/python3.11),
# libabsl-dev, g++; py-spy from the project venv (PYSPY=...).
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(dirname "$HERE")
BIN=$(mktemp -d)
PY=/usr/bin/python3.11            # Debian's Python: its debug symbols and gdb extension are packaged
VENV_PY=${VENV_PY:-$OUT/../../../.venv/bin/python}   # pyenv's 3.11.7, libpython3.11.so, no gdb extension
export PYSPY=${PYSPY:-$(dirname "$VENV_PY")/py-spy}
CAP="python3 $HERE/capture.py"
g++ -g -O0 -pthread -o "$BIN/cpp_deadlock" "$HERE/cpp_deadlock.cpp"
g++ -O2 -s -pthread -o "$BIN/cpp_deadlock_stripped" "$HERE/cpp_deadlock.cpp"
g++ -g -O1 -pthread -o "$BIN/absl_deadlock" "$HERE/absl_deadlock.cpp" $(pkg-config --libs absl_synchronization)
gcc -g -shared -fPIC -pthread -o "$BIN/libteardown_lock.so" "$HERE/teardown_lock.c"
gcc -g -shared -fPIC -o "$BIN/libslow_init.so" "$HERE/slow_init.c"

ALL=gdb-bt,gdb-all-bt,gdb-all-bt-full,gdb-py-bt,gdb-session,pstack,eu-stack,eu-stack-v,lldb,py-spy,py-spy-native,py-spy-json,faulthandler
$CAP "$OUT/mutex" --faulthandler --tools $ALL -- $PY "$HERE/native_locks.py" mutex
$CAP "$OUT/mutex-pyenv" --tools gdb-all-bt,eu-stack,py-spy-native -- "$VENV_PY" "$HERE/native_locks.py" mutex
$CAP "$OUT/cond" --tools gdb-all-bt,pstack,eu-stack,lldb,py-spy-native -- $PY "$HERE/native_locks.py" cond
$CAP "$OUT/gil" --faulthandler --tools gdb-all-bt,gdb-py-bt,eu-stack,py-spy,py-spy-native,py-spy-json,faulthandler -- $PY "$HERE/native_locks.py" gil
$CAP "$OUT/gil-sleep" --tools gdb-all-bt,py-spy,py-spy-native,py-spy-json -- $PY "$HERE/native_locks.py" sleep
$CAP "$OUT/fork-mutex" --tools gdb-bt,gdb-all-bt,gdb-py-bt,eu-stack,py-spy-native -- $PY "$HERE/native_locks.py" fork
$CAP "$OUT/fork-pylock" --tools gdb-all-bt,gdb-py-bt,py-spy,py-spy-native -- $PY "$HERE/native_locks.py" pylock
$CAP "$OUT/cpp" --tools gdb-bt,gdb-all-bt,gdb-all-bt-full,gdb-session,pstack,eu-stack,eu-stack-v,lldb -- "$BIN/cpp_deadlock"
$CAP "$OUT/cpp-stripped" --tools gdb-all-bt,eu-stack,lldb -- "$BIN/cpp_deadlock_stripped"
$CAP "$OUT/absl" --tools gdb-all-bt,eu-stack,lldb -- "$BIN/absl_deadlock"
$CAP "$OUT/fork-exit" --tools gdb-all-bt,gdb-py-bt,eu-stack,pstack,py-spy-native -- $PY "$HERE/native_locks.py" exit --library "$BIN/libteardown_lock.so"
$CAP "$OUT/gil-dlopen" --tools gdb-all-bt,py-spy,py-spy-native,py-spy-json -- $PY "$HERE/native_locks.py" dlopen-gil --library "$BIN/libslow_init.so"
for r in faulthandler stack-only print-stack hash-thread format-list dashes hex-ids logging; do
  $CAP "$OUT/dialects" --faulthandler --self-dump-name "$r" --tools faulthandler -- $PY "$HERE/py_dialects.py" --recipe $r
  mv "$OUT/dialects/commands.txt" "$OUT/dialects/commands-$r.txt"
done
$CAP "$OUT/dialects-tools" --tools gdb-py-bt,py-spy -- $PY "$HERE/py_dialects.py" --recipe faulthandler --faulthandler /dev/null
rm -rf "$BIN"
