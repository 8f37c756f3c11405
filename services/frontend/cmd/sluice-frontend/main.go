// Command sluice-frontend runs a frontend: the stateless HTTP entry point that
// accepts records in JSON or msgpack (batched per partition here) or as the
// SDK's ready-made record batches, forwards each batch to its partition's
// leader, serves HTTP fetches for clients that cannot reach storage nodes,
// and forwards the admin API to the metadata service and the consumer-group
// API to the offsets service.
package main

import (
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/frontend/internal/app"
)

func main() { service.Main("sluice-frontend", app.Parse) }
