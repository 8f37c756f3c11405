#!/usr/bin/env bash
# Runs every fuzz target of the monorepo for a bounded time each (make fuzz).
# The targets are found by their declarations (func FuzzX in a _test.go
# file), so a new one is picked up without listing it here. An input that
# fails is written by Go under the package's testdata/fuzz/<Target>/, where
# `make test` replays it from then on: commit it with the fix as a regression
# seed.
# Usage: tools/scripts/fuzz.sh [time per target, default 10s] [target regexp, default all]
set -euo pipefail
fuzztime=${1:-${FUZZTIME:-10s}}
only=${2:-.}
root=$(cd "$(dirname "$0")/../.." && pwd)
modules=(libs services/metadata services/frontend services/storage services/offsets tools integration)
failed=()
ran=0
for m in "${modules[@]}"; do
	cd "$root/$m"
	# Targets by package directory: func FuzzX(f *testing.F) in a _test.go file.
	while IFS=: read -r file target; do
		dir=$(dirname "$file")
		[[ "$target" =~ $only ]] || continue
		ran=$((ran + 1))
		echo "== $m/${dir#./} $target ($fuzztime)"
		# Minimizing a failing input is bounded too: a target whose runs touch
		# the disk would otherwise minimize for minutes.
		out=$(mktemp)
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 30s "$dir" 2>&1 | tee "$out"; then
			# The fuzzing engine itself sometimes ends a run with "context
			# deadline exceeded" when the time runs out while it waits on a
			# worker; that is no failing input (none is written), so it is
			# reported and not counted.
			if grep -q "context deadline exceeded" "$out" && ! grep -q "Failing input written" "$out"; then
				echo "== $m/${dir#./} $target: the engine stopped at the deadline without a failing input; not counted"
			else
				failed+=("$m/${dir#./} $target")
			fi
		fi
		rm -f "$out"
	done < <(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's/:func /:/' | sort)
done
echo "== $ran fuzz targets ran for $fuzztime each"
if [ ${#failed[@]} -gt 0 ]; then
	printf 'failed: %s\n' "${failed[@]}"
	exit 1
fi
