#!/bin/sh
# make test N times in a row (default 3) while two busy loops keep both cores loaded, as on a
# shared CI machine. Run from a clean clone: `sh scripts/test-under-load.sh 3`.
set -eu
rounds="${1:-3}"
sh -c 'while :; do :; done' & hog1=$!
sh -c 'while :; do :; done' & hog2=$!
trap 'kill "$hog1" "$hog2" 2>/dev/null' EXIT INT TERM
i=1
while [ "$i" -le "$rounds" ]; do
    start=$(date +%s)
    make test
    echo "test-under-load: round $i of $rounds passed in $(( $(date +%s) - start )) s"
    i=$((i + 1))
done
