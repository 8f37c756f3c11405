// Command sluice-metadata runs one member of the metadata Raft group: the
// cluster's source of truth for storage nodes, topics and partitions.
// `sluice-metadata -h` lists the flags; each also reads SLUICE_<FLAG>.
package main

import (
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/metadata/internal/app"
)

func main() { service.Main(app.Name, app.Parse) }
