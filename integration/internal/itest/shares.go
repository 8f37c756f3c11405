package itest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/shares"
)

// PollShare polls a share consumer until fn says it has what it waits for,
// handing it every record with the time it arrived.
func PollShare(t *testing.T, ctx context.Context, sc *client.ShareConsumer, fn func(r client.ShareRecord, at time.Time) bool) {
	t.Helper()
	for ctx.Err() == nil {
		recs, err := sc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if fn(r, time.Now()) {
				return
			}
		}
	}
	t.Fatal("timed out polling the share group")
}

// ConfigureShareGroup sets a share group's configuration.
func ConfigureShareGroup(t *testing.T, ctx context.Context, c *localcluster.Cluster, group string, set map[string]string) {
	t.Helper()
	if err := shares.NewClient(c.OffsetsURLs()).Configure(ctx, group, set); err != nil {
		t.Fatalf("configuring share group %s: %v", group, err)
	}
}
