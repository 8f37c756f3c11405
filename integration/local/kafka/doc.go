// Package kafka holds end-to-end tests of the Kafka protocol and of Kafka
// clients no one here wrote (kcat, kafka-python, confluent-kafka, franz-go,
// sarama): APIs, groups, transactions, share groups and security through the
// Kafka listeners. They run the real Sluice binaries as processes on
// 127.0.0.1 (no containers): the binaries are built from this checkout into
// a temporary directory and started with libs/dev/localcluster, through the
// harness of integration/internal/itest.
//
// Each test starts clusters of its own on ports no other test of the process
// is handed (localcluster.FreePorts), so the tests run in parallel
// (t.Parallel; `go test -parallel N` bounds how many at once, `make test`
// runs 3). The figures tests run alone, before the parallel ones: they
// measure figures (SLUICE_FIGURES=1), which a neighbour's load would skew.
// go test runs packages side by side, so measure them with -run naming the
// test (docs/performance.md).
package kafka
