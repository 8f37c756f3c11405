// Command sluicectl is the command-line client of a Sluice cluster.
package main

import (
	"os"

	"github.com/sluicemq/sluice/tools/internal/ctl"
)

func main() { os.Exit(ctl.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
