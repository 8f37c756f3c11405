// Package ops holds end-to-end tests of what operators and users touch:
// sluicectl, sluice-dev and sluice-bench, the documentation's commands and
// tables, the console, dashboard and metrics, defaults, the HTTP frontend
// and producers, and security (TLS, authentication, ACLs, quotas). They run
// the real Sluice binaries as processes on 127.0.0.1 (no containers): the
// binaries are built from this checkout into a temporary directory and
// started with libs/dev/localcluster, through the harness of
// integration/internal/itest.
//
// Each test starts clusters of its own on ports no other test of the process
// is handed (localcluster.FreePorts), or, when it leaves the cluster as it
// found it, runs on the package's shared one (itest.SharedCluster: the
// sluicectl tour, adding partitions), so the tests run in parallel
// (t.Parallel; `go test -parallel N` bounds how many at once, `make test`
// runs 3). The figures tests run alone, before the parallel ones: they
// measure figures (SLUICE_FIGURES=1), which a neighbour's load would skew.
// go test runs packages side by side, so measure them with -run naming the
// test (docs/performance.md).
package ops
