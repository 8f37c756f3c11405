// Package local holds end-to-end tests that run the real Sluice binaries as
// processes on 127.0.0.1 (no containers): the binaries are built from this
// checkout into a temporary directory and started with libs/localcluster.
package local
