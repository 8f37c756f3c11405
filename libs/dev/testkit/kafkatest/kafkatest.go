// Package kafkatest helps the tests of the Kafka listeners; it is apart
// from testkit so that the modules whose tests do not speak Kafka need no
// Kafka client.
package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request sends req to one Kafka broker (no routing by metadata) and
// returns its answer; a request that fails fails the test.
func Request(t testing.TB, b *kgo.Broker, req kmsg.Request) kmsg.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.Request(ctx, req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp
}
