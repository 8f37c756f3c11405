// Command sluice-offsets runs the offsets service: committed consumer offsets
// per group, topic and partition, kept in bbolt.
package main

import (
	"github.com/sluicemq/sluice/libs/service"
	"github.com/sluicemq/sluice/services/offsets/internal/app"
)

func main() { service.Main("sluice-offsets", app.Parse) }
