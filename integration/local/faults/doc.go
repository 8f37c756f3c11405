// Package faults holds end-to-end tests of failures and replication: leaders
// killed, paused and cut off under load, ISR changes, reassignment, damaged
// and full disks, and compaction through kills. They run the real Sluice
// binaries as processes on 127.0.0.1 (no containers): the binaries are built
// from this checkout into a temporary directory and started with
// libs/dev/localcluster, through the harness of integration/internal/itest.
//
// Each test starts clusters of its own on ports no other test of the process
// is handed (localcluster.FreePorts), so the tests run in parallel
// (t.Parallel; `go test -parallel N` bounds how many at once, `make test`
// runs 3). Two kinds run alone, before the parallel ones: those that measure
// figures (SLUICE_FIGURES=1), which a neighbour's load would skew, and those
// that cut links between network namespaces, whose names and subnet are the
// process's (localcluster's netns layout). go test runs packages side by
// side, so measure figures with -run naming the test (docs/performance.md).
package faults
