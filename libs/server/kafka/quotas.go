package kafka

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Client quotas (KIP-546's DescribeClientQuotas and AlterClientQuotas,
// which kafka-configs --entity-type clients uses) map onto the cluster's
// quotas per client id: an entity is one client-id component, its name the
// client id or null for the default, and the keys producer_byte_rate and
// consumer_byte_rate are a quota's produce and fetch rates. Kafka's user and
// ip entities and its other keys are not kept; asking for them is
// INVALID_REQUEST, saying so. Both APIs need an admin principal (Kafka asks
// for DESCRIBE_CONFIGS or ALTER_CONFIGS on the cluster).

// The quota entity type and keys Sluice keeps.
const (
	quotaClientID      = "client-id"
	quotaProducerBytes = "producer_byte_rate"
	quotaConsumerBytes = "consumer_byte_rate"
)

// kafkaQuotaEntityTypes are the entity types Kafka defines.
var kafkaQuotaEntityTypes = []string{"user", quotaClientID, "ip"}

// describeClientQuotas answers DescribeClientQuotas.
func (b *Broker) describeClientQuotas(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.DescribeClientQuotasRequest)
	resp := kmsg.NewPtrDescribeClientQuotasResponse()
	fail := func(code protocol.Code, msg string) Reply {
		resp.ErrorCode, resp.ErrorMessage = int16(code), &msg
		return Reply{Msg: resp}
	}
	snap, code := b.clusterSnapshot(ctx, c, "DescribeClientQuotas", cluster.OpDescribeConfigs)
	if snap == nil {
		return fail(code, "describing quotas: "+code.String())
	}
	match, err := quotaFilter(r.Components)
	if err != nil {
		return fail(protocol.InvalidRequest, err.Error())
	}
	for _, q := range snap.Quotas {
		if !match(q.ClientID) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
		ent.Type, ent.Name = quotaClientID, quotaName(q.ClientID)
		e.Entity = []kmsg.DescribeClientQuotasResponseEntryEntity{ent}
		for _, kv := range []struct {
			key  string
			rate int64
		}{{quotaProducerBytes, q.ProduceBytesPerSec}, {quotaConsumerBytes, q.FetchBytesPerSec}} {
			if kv.rate > 0 {
				v := kmsg.NewDescribeClientQuotasResponseEntryValue()
				v.Key, v.Value = kv.key, float64(kv.rate)
				e.Values = append(e.Values, v)
			}
		}
		resp.Entries = append(resp.Entries, e)
	}
	return Reply{Msg: resp}
}

// quotaFilter turns a DescribeClientQuotas filter into a test of client
// ids ("" the default). Components of Kafka's other entity types match no
// quota of Sluice's (an entity holding them would be needed); unknown types
// and a type given twice are refused. Strict changes nothing: Sluice's
// entities hold one component.
func quotaFilter(components []kmsg.DescribeClientQuotasRequestComponent) (func(id string) bool, error) {
	match := func(string) bool { return true }
	seen := map[string]bool{}
	for _, comp := range components {
		if !slices.Contains(kafkaQuotaEntityTypes, comp.EntityType) {
			return nil, fmt.Errorf("quota entity type %q: want user, client-id or ip", comp.EntityType)
		}
		if seen[comp.EntityType] {
			return nil, fmt.Errorf("quota entity type %q given twice", comp.EntityType)
		}
		seen[comp.EntityType] = true
		if comp.EntityType != quotaClientID {
			return func(string) bool { return false }, nil
		}
		switch comp.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if comp.Match == nil {
				return nil, fmt.Errorf("an exact match needs a client id")
			}
			want := *comp.Match
			match = func(id string) bool { return id != "" && id == want }
		case kmsg.QuotasMatchTypeDefault:
			match = func(id string) bool { return id == "" }
		case kmsg.QuotasMatchTypeAny:
		default:
			return nil, fmt.Errorf("match type %d: want 0 (exact), 1 (default) or 2 (any)", comp.MatchType)
		}
	}
	return match, nil
}

// quotaName is a client id as a quota entity's name: null for the default.
func quotaName(id string) *string {
	if id == "" {
		return nil
	}
	return &id
}

// alterClientQuotas answers AlterClientQuotas: each entry's operations
// change its client id's quota from what the metadata leader holds.
func (b *Broker) alterClientQuotas(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.AlterClientQuotasRequest)
	resp := kmsg.NewPtrAlterClientQuotasResponse()
	admin := b.OnCluster(c, "AlterClientQuotas", cluster.OpAlterConfigs)
	changed := false
	for _, in := range r.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		for _, e := range in.Entity {
			oe := kmsg.NewAlterClientQuotasResponseEntryEntity()
			oe.Type, oe.Name = e.Type, e.Name
			out.Entity = append(out.Entity, oe)
		}
		err := protocol.ClusterAuthorizationFailed.Err("altering quotas needs an admin principal")
		if admin {
			var did bool
			did, err = b.alterClientQuota(ctx, in, r.ValidateOnly)
			changed = changed || did
		}
		out.ErrorCode, out.ErrorMessage = errorFields(err)
		resp.Entries = append(resp.Entries, out)
	}
	if changed {
		_, _ = b.model.Refresh(ctx) // the client's next describe sees it
	}
	return Reply{Msg: resp}
}

// alterClientQuota applies one entry and reports whether it changed a
// quota.
func (b *Broker) alterClientQuota(ctx context.Context, in kmsg.AlterClientQuotasRequestEntry, validateOnly bool) (bool, error) {
	if len(in.Entity) != 1 || in.Entity[0].Type != quotaClientID {
		return false, protocol.InvalidRequest.Err("a quota entity is one client-id: Sluice keeps quotas per client id, not per user or ip")
	}
	id := ""
	if n := in.Entity[0].Name; n != nil {
		if *n == "" || len(*n) > cluster.MaxClientIDLen {
			return false, protocol.InvalidRequest.Err("client id %q: want 1 to %d bytes (null for the default)", *n, cluster.MaxClientIDLen)
		}
		id = *n
	}
	q := cluster.Quota{ClientID: id}
	if snap := b.Snapshot(ctx); snap != nil {
		for _, have := range snap.Quotas {
			if have.ClientID == id {
				q = have
			}
		}
	}
	for _, op := range in.Ops {
		rate := int64(0)
		if !op.Remove {
			if op.Value < 1 || op.Value > math.MaxInt64/2 || op.Value != math.Trunc(op.Value) {
				return false, protocol.InvalidRequest.Err("%s=%v: want a whole number of bytes per second, at least 1", op.Key, op.Value)
			}
			rate = int64(op.Value)
		}
		switch op.Key {
		case quotaProducerBytes:
			q.ProduceBytesPerSec = rate
		case quotaConsumerBytes:
			q.FetchBytesPerSec = rate
		default:
			return false, protocol.InvalidRequest.Err("quota key %q is not kept: want %s or %s", op.Key, quotaProducerBytes, quotaConsumerBytes)
		}
	}
	if validateOnly {
		return false, nil
	}
	if err := b.admin.SetQuota(ctx, q); err != nil {
		return false, err
	}
	return true, nil
}
