#!/bin/sh
# make test N times in a row (default 1) while one busy loop per core keeps every core loaded,
# as on a shared CI machine: no test may depend on the machine's speed. From a clean clone:
#   sh scripts/test-under-load.sh        (once; the issue-22 acceptance)
#   sh scripts/test-under-load.sh 3      (three rounds in a row)
set -eu
rounds="${1:-1}"
cores=$(nproc 2>/dev/null || echo 2)
hogs=""
trap 'for p in $hogs; do kill "$p" 2>/dev/null || true; done' EXIT INT TERM
n=0
while [ "$n" -lt "$cores" ]; do
    sh -c 'while :; do :; done' &
    hogs="$hogs $!"
    n=$((n + 1))
done
echo "test-under-load: $cores busy loops started (pids$hogs)"
i=1
while [ "$i" -le "$rounds" ]; do
    start=$(date +%s)
    make test
    echo "test-under-load: round $i of $rounds passed in $(( $(date +%s) - start )) s"
    i=$((i + 1))
done
