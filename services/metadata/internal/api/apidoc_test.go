package api

import (
	"testing"

	"github.com/sluicemq/sluice/libs/dev/testkit/apidoc"
)

// TestRoutesDocumented: every route of the metadata API's table has its
// entry in the Metadata section of docs/http-api.md, and that section
// documents no route the table lacks.
func TestRoutesDocumented(t *testing.T) {
	apidoc.CheckRoutes(t, "../../../../docs/http-api.md", "Metadata", (&Server{}).newRoutes().Routes())
}
