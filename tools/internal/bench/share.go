package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/shares"
)

// shareGroupConfig returns the settings a share run gives its group: the
// --group-config values, checked as the offsets service checks them, and
// share.auto.offset.reset=earliest unless given, so that a new group reads the
// backlog.
func shareGroupConfig(set map[string]string) (map[string]string, error) {
	out := maps.Clone(set)
	if out == nil {
		out = map[string]string{}
	}
	if _, ok := out[shares.ConfigAutoOffsetReset]; !ok {
		out[shares.ConfigAutoOffsetReset] = "earliest"
	}
	cfg := shares.DefaultConfig()
	for k, v := range out {
		if err := cfg.Set(k, v); err != nil {
			return nil, err
		}
	}
	return out, cfg.Validate()
}

// shareMember is a member of a share group that accepts every record. Its
// poll carries the acceptances of the records the previous poll returned
// and returns those records once the acceptances are confirmed: what a
// share run counts is acknowledged records, not delivered ones.
type shareMember struct {
	c    *client.ShareConsumer
	held []polled // accepted, the acceptance not confirmed yet
}

func (m *shareMember) poll(ctx context.Context) ([]polled, error) {
	recs, err := m.c.Poll(ctx)
	confirmed := m.held
	m.held = nil
	if errors.Is(err, client.ErrAckRefused) {
		// Refused acceptances leave their records to be delivered again
		// (their locks expired, or the member was fenced): they are
		// counted when that delivery is accepted.
		confirmed, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		m.c.Acknowledge(r, shares.AckAccept)
		m.held = append(m.held, polled{partition: r.Partition, offset: r.Offset, value: r.Value})
	}
	return confirmed, nil
}

// states is empty: a share group assigns no partitions.
func (m *shareMember) states() []partState { return nil }

// close acknowledges what is held and leaves the group.
func (m *shareMember) close(ctx context.Context) { _ = m.c.Close(ctx) } // the run's figures are taken

// newShareMembers configures the run's share group and creates its members.
func (r *run) newShareMembers(ctx context.Context) ([]member, error) {
	set, err := shareGroupConfig(r.cfg.GroupConfig)
	if err != nil {
		return nil, err
	}
	if err := shares.NewClient(r.cfg.Offsets).Configure(ctx, r.cfg.Group, set); err != nil {
		return nil, fmt.Errorf("configure share group %s: %w", r.cfg.Group, err)
	}
	var out []member
	for i := range r.cfg.Consumers {
		c, err := client.NewShareConsumer(client.ShareConsumerConfig{Metadata: r.cfg.Metadata, Offsets: r.cfg.Offsets,
			Group: r.cfg.Group, Topic: r.cfg.Topic, ClientID: fmt.Sprintf("sluice-bench-%d", i)})
		if err != nil {
			closeConsumers(out)
			return nil, fmt.Errorf("share consumer: %w", err)
		}
		out = append(out, &shareMember{c: c})
	}
	return out, nil
}
