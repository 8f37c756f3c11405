package kafka

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// TestKafkaAPIsDocumented: the table of served APIs in docs/kafka.md is
// what a frontend's ApiVersions advertises, key for key and version range
// for version range (the SASL APIs, advertised only with
// -kafka-sasl-mechanisms, apart).
func TestKafkaAPIsDocumented(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	b, err := os.ReadFile("../../../docs/kafka.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start, end := strings.Index(doc, "## APIs and versions"), strings.Index(doc, "**Not served.**")
	if start < 0 || end < start {
		t.Fatal("docs/kafka.md has no table of served APIs before its list of those not served")
	}
	documented := map[int16]string{}
	row := regexp.MustCompile(`^\| ([0-9, ]+) \| [^|]+ \| ([0-9, -]+) \|`)
	for _, line := range strings.Split(doc[start:end], "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		keys, ranges := strings.Split(m[1], ", "), strings.Split(m[2], ", ")
		for i, k := range keys {
			key, err := strconv.Atoi(strings.TrimSpace(k))
			if err != nil {
				t.Fatalf("row %q: key %q", line, k)
			}
			r := ranges[0]
			if len(ranges) == len(keys) {
				r = ranges[i]
			}
			if !strings.Contains(r, "-") {
				r += "-" + r
			}
			documented[int16(key)] = r
		}
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 1})
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	kafkaRequest(t, c.KafkaAddrs()[0], req, resp)
	advertised := map[int16]string{}
	for _, k := range resp.ApiKeys {
		advertised[k.ApiKey] = fmt.Sprintf("%d-%d", k.MinVersion, k.MaxVersion)
	}
	t.Logf("%d APIs documented, %d advertised", len(documented), len(advertised))
	for _, sasl := range []int16{17, 36} {
		delete(documented, sasl)
	}
	keys := slices.Collect(maps.Keys(documented))
	for k := range advertised {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		if documented[k] != advertised[k] {
			t.Errorf("API %d: docs/kafka.md says %q, ApiVersions %q", k, documented[k], advertised[k])
		}
	}
}
