// Command sluice-storage runs a storage node: it holds partition replicas as
// segment logs and serves produce, fetch and offset look-ups over the storage
// protocol.
package main

import (
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/storage/internal/node"
)

func main() { service.Main("sluice-storage", node.Parse) }
