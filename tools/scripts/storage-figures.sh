#!/usr/bin/env bash
# Measures the storage figures of docs/dev/performance-log.md: each benchmark against its
# physical limit, run alternately in separate processes (the disk and CPU of a
# shared machine drift; alternating keeps both sides under the same drift).
# Usage: tools/scripts/storage-figures.sh [runs] [benchtime]
set -euo pipefail
runs=${1:-5}
benchtime=${2:-3s}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root/services/storage" && go test -c -o "$tmp/log.test" ./internal/log/ && go test -c -o "$tmp/server.test" ./internal/server/)
cd "$tmp"
pair() { # test-binary benchmark-a benchmark-b
	for i in $(seq "$runs"); do
		./"$1" -test.run '^$' -test.bench "$2" -test.benchtime "$benchtime" | grep '^Benchmark'
		./"$1" -test.run '^$' -test.bench "$3" -test.benchtime "$benchtime" | grep '^Benchmark'
	done
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
report() { # file name-a name-b
	a=$(grep "^$2-" "$1" | awk '{for(i=1;i<=NF;i++) if($(i+1)=="MB/s") print $i}' | median)
	b=$(grep "^$3-" "$1" | awk '{for(i=1;i<=NF;i++) if($(i+1)=="MB/s") print $i}' | median)
	echo "$2 median $a MB/s, $3 median $b MB/s, ratio $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", a/b}')"
}
pair log.test 'BenchmarkAppend1KiB$' 'BenchmarkRawWriteFsync$' | tee append.txt
pair server.test 'BenchmarkFetchSendfile$' 'BenchmarkRawSendfile$' | tee fetch.txt
echo
report append.txt BenchmarkAppend1KiB BenchmarkRawWriteFsync
report fetch.txt BenchmarkFetchSendfile BenchmarkRawSendfile
