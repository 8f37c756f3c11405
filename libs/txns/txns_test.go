package txns

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
)

func TestValidateID(t *testing.T) {
	for _, ok := range []string{"a", "etl-job.7/part 3", "ü-ñ", strings.Repeat("x", MaxIDLen)} {
		if err := ValidateID(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", MaxIDLen+1), "tab\there", "\xff"} {
		if err := ValidateID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestNeedOf(t *testing.T) {
	if n := NeedOf(http.MethodPost, "/v1/txns/tx/partitions", []byte(`{"partitions":[{"topic":"out","partition":0},{"topic":"log","partition":2}]}`)); n.Op != cluster.OpProduce || !slices.Equal(n.Topics, []string{"out", "log"}) {
		t.Errorf("partitions: %+v", n)
	}
	if n := NeedOf(http.MethodPost, "/v1/txns/tx/offsets", []byte(`{"group":"g","offsets":[{"topic":"in","partition":0,"offset":3}]}`)); n.Op != cluster.OpConsume || !n.Group || !slices.Equal(n.Topics, []string{"in"}) {
		t.Errorf("offsets: %+v", n)
	}
	if n := NeedOf(http.MethodPost, "/v1/txns/tx/init", nil); n.Op != cluster.OpProduce || len(n.Topics) != 0 {
		t.Errorf("init: %+v", n)
	}
	if n := NeedOf(http.MethodGet, "/v1/txns", nil); !n.Describe || n.TransactionalID != "" || n.Read {
		t.Errorf("list: %+v", n)
	}
	if n := NeedOf(http.MethodGet, "/v1/txns/tx", nil); !n.Describe || n.TransactionalID != "tx" || n.Op != "" {
		t.Errorf("describe: %+v", n)
	}
}
