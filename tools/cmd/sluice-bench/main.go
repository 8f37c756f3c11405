// Command sluice-bench is the load generator and benchmark of a Sluice
// cluster: produce, consume and end-to-end runs that report throughput and
// latency percentiles (see package bench).
package main

import (
	"os"

	"github.com/sluicemq/sluice/tools/internal/bench"
)

func main() { os.Exit(bench.Main(os.Args[1:], os.Stdout, os.Stderr)) }
