// Command sluice-frontend runs a frontend: the stateless HTTP entry point that
// accepts records in JSON or msgpack, batches them per partition and forwards
// each batch to its partition's leader, and forwards the topic admin API to
// the metadata service.
package main

import (
	"github.com/sluicemq/sluice/libs/service"
	"github.com/sluicemq/sluice/services/frontend/internal/app"
)

func main() { service.Main("sluice-frontend", app.Parse) }
