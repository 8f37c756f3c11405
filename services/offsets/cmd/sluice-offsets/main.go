// Command sluice-offsets runs a replica of the offsets service: consumer
// groups (membership, assignment) and their committed offsets, replicated by
// Raft and kept in bbolt. `sluice-offsets check-state -data-dir D` checks a
// stopped replica's state file against its Raft log.
package main

import (
	"os"

	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/offsets/internal/app"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == app.CheckStateCommand {
		os.Exit(app.CheckState(os.Args[2:], os.Stdout, os.Stderr))
	}
	service.Main(app.Name, app.Parse)
}
