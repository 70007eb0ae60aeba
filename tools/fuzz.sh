#!/usr/bin/env bash
# Runs one fuzz target for a while: tools/fuzz.sh GO PACKAGE NAME FUZZTIME.
#
# Go 1.26's fuzz coordinator can end a run bound by time with a bare "context
# deadline exceeded" just as the time runs out, though no input failed
# (golang/go#75804, fixed in Go 1.27). Such a run, which wrote no failing input
# and printed no panic or test error, is run once more; any other failure fails.
set -uo pipefail
go=$1 pkg=$2 name=$3 fuzztime=$4
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for try in 1 2; do
  "$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  if [ "$status" -eq 0 ]; then
    exit 0
  fi
  if [ "$try" -eq 1 ] && grep -q 'context deadline exceeded' "$log" &&
    ! grep -q -e 'Failing input written' -e 'panic:' -e '_test\.go:[0-9]*:' "$log"; then
    echo "fuzz $name: the coordinator's deadline race (golang/go#75804) and no failing input: once more"
    continue
  fi
  exit "$status"
done
