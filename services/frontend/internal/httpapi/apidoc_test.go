package httpapi

import (
	"testing"

	"github.com/sluicemq/sluice/libs/dev/testkit/apidoc"
)

// TestRoutesDocumented: every route of the frontend's table has its entry
// in the Frontend section of docs/http-api.md, and that section documents
// no route the table lacks.
func TestRoutesDocumented(t *testing.T) {
	apidoc.CheckRoutes(t, "../../../../docs/http-api.md", "Frontend", (&Server{}).newRoutes().Routes())
}
