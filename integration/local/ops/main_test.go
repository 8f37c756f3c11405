package ops

import (
	"testing"

	"github.com/sluicemq/sluice/integration/internal/itest"
)

// TestMain stops the cluster the package's tests share
// (itest.SharedCluster) once they end.
func TestMain(m *testing.M) { itest.Main(m) }
