// Package itest is the harness the end-to-end tests under integration/local
// share: it builds the Sluice binaries from this checkout once per test
// process (BuildBinaries), starts clusters of processes on 127.0.0.1 with
// libs/dev/localcluster (StartCluster, StartClusterConfig,
// StartNetnsCluster, StartTLSCluster), runs group member processes and reads
// what they report (StartMember, StartMemberProc), and holds the helpers
// tests of more than one area use: sluicectl, topics, producing and reading
// back, metrics, franz-go clients, share groups and the sluice-bench
// figures. A helper only one area's tests use lives in that area's package.
//
// The helpers that can fail take the test and fail it (t.Fatal), except
// TryPost and ProduceOne, which return their errors for load that runs
// through failures. A cluster or process a helper starts is stopped when the test
// ends, and its log is printed when the test failed. Tests that use them may
// run in parallel: clusters get ports no other test of the process is handed
// (localcluster.FreePorts).
package itest
