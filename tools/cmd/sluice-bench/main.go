// Command sluice-bench is the load generator and benchmark of a Sluice
// cluster: produce, consume and end-to-end runs that report throughput and
// latency percentiles (see package bench).
package main

import (
	"os"
	"runtime/debug"

	"github.com/sluicemq/sluice/tools/internal/bench"
)

// gcPercent is the garbage collector's target unless GOGC is set: the
// benchmark's own heap is small and short-lived, and collecting it less
// often leaves more of the machine to the cluster being measured.
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	os.Exit(bench.Main(os.Args[1:], os.Stdout, os.Stderr))
}
