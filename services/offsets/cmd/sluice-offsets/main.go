// Command sluice-offsets runs a replica of the offsets service: consumer
// groups (membership, assignment) and their committed offsets, replicated by
// Raft and kept in bbolt.
package main

import (
	"github.com/sluicemq/sluice/libs/service"
	"github.com/sluicemq/sluice/services/offsets/internal/app"
)

func main() { service.Main(app.Name, app.Parse) }
