package kafka

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// TestDescribeClientQuotas: the cluster's quotas as client-id entities, by
// Kafka's filters; other entity types match nothing, bad filters are
// INVALID_REQUEST, a principal that is no admin is refused.
func TestDescribeClientQuotas(t *testing.T) {
	b, m, _ := testBroker(true)
	m.snap.Quotas = []cluster.Quota{{ClientID: "", ProduceBytesPerSec: 100}, {ClientID: "billing", ProduceBytesPerSec: 10, FetchBytesPerSec: 20},
		{ClientID: "etl", FetchBytesPerSec: 5}}
	describe := func(who string, comps ...kmsg.DescribeClientQuotasRequestComponent) (string, int16) {
		t.Helper()
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Components = comps
		resp := b.describeClientQuotas(context.Background(), connAs(who), req).Msg.(*kmsg.DescribeClientQuotasResponse)
		var out []string
		for _, e := range resp.Entries {
			s := ""
			for _, ent := range e.Entity {
				name := "<default>"
				if ent.Name != nil {
					name = *ent.Name
				}
				s += ent.Type + "=" + name
			}
			for _, v := range e.Values {
				s += fmt.Sprintf(" %s:%v", v.Key, v.Value)
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return strings.Join(out, "; "), resp.ErrorCode
	}
	comp := func(typ string, mt kmsg.QuotasMatchType, name *string) kmsg.DescribeClientQuotasRequestComponent {
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType, c.MatchType, c.Match = typ, mt, name
		return c
	}
	billing := "billing"
	for _, tc := range []struct {
		name  string
		comps []kmsg.DescribeClientQuotasRequestComponent
		want  string
		code  protocol.Code
	}{
		{"every quota", nil, "client-id=<default> producer_byte_rate:100; client-id=billing producer_byte_rate:10 consumer_byte_rate:20; client-id=etl consumer_byte_rate:5", 0},
		{"one client", []kmsg.DescribeClientQuotasRequestComponent{comp("client-id", kmsg.QuotasMatchTypeExact, &billing)}, "client-id=billing producer_byte_rate:10 consumer_byte_rate:20", 0},
		{"the default", []kmsg.DescribeClientQuotasRequestComponent{comp("client-id", kmsg.QuotasMatchTypeDefault, nil)}, "client-id=<default> producer_byte_rate:100", 0},
		{"users", []kmsg.DescribeClientQuotasRequestComponent{comp("user", kmsg.QuotasMatchTypeAny, nil)}, "", 0},
		{"an unknown type", []kmsg.DescribeClientQuotasRequestComponent{comp("group", kmsg.QuotasMatchTypeAny, nil)}, "", protocol.InvalidRequest},
		{"a type twice", []kmsg.DescribeClientQuotasRequestComponent{comp("client-id", kmsg.QuotasMatchTypeAny, nil), comp("client-id", kmsg.QuotasMatchTypeAny, nil)}, "", protocol.InvalidRequest},
		{"exact without a name", []kmsg.DescribeClientQuotasRequestComponent{comp("client-id", kmsg.QuotasMatchTypeExact, nil)}, "", protocol.InvalidRequest},
	} {
		if got, code := describe("root", tc.comps...); got != tc.want || code != int16(tc.code) {
			t.Errorf("%s: %q, code %d; want %q, %d", tc.name, got, code, tc.want, tc.code)
		}
	}
	if got, code := describe("alice"); got != "" || code != int16(protocol.ClusterAuthorizationFailed) {
		t.Errorf("alice: %q, code %d; want CLUSTER_AUTHORIZATION_FAILED", got, code)
	}
}

// TestAlterClientQuotas: operations change a client id's quota from what
// it was; validate_only changes nothing; other entities, keys and values
// are refused entry by entry.
func TestAlterClientQuotas(t *testing.T) {
	b, m, a := testBroker(true)
	m.snap.Quotas = []cluster.Quota{{ClientID: "billing", ProduceBytesPerSec: 10, FetchBytesPerSec: 20}}
	entry := func(typ string, name *string, ops ...kmsg.AlterClientQuotasRequestEntryOp) kmsg.AlterClientQuotasRequestEntry {
		e := kmsg.NewAlterClientQuotasRequestEntry()
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type, ent.Name = typ, name
		e.Entity, e.Ops = []kmsg.AlterClientQuotasRequestEntryEntity{ent}, ops
		return e
	}
	op := func(key string, v float64, remove bool) kmsg.AlterClientQuotasRequestEntryOp {
		o := kmsg.NewAlterClientQuotasRequestEntryOp()
		o.Key, o.Value, o.Remove = key, v, remove
		return o
	}
	alter := func(who string, validateOnly bool, entries ...kmsg.AlterClientQuotasRequestEntry) []int16 {
		t.Helper()
		req := kmsg.NewPtrAlterClientQuotasRequest()
		req.Entries, req.ValidateOnly = entries, validateOnly
		resp := b.alterClientQuotas(context.Background(), connAs(who), req).Msg.(*kmsg.AlterClientQuotasResponse)
		var codes []int16
		for _, e := range resp.Entries {
			codes = append(codes, e.ErrorCode)
		}
		return codes
	}
	billing, empty := "billing", ""
	codes := alter("root", false,
		entry("client-id", &billing, op("producer_byte_rate", 50, false), op("consumer_byte_rate", 0, true)),
		entry("client-id", nil, op("consumer_byte_rate", 1000, false)),
		entry("user", &billing, op("producer_byte_rate", 1, false)),
		entry("client-id", &billing, op("request_percentage", 50, false)),
		entry("client-id", &billing, op("producer_byte_rate", 1.5, false)),
		entry("client-id", &empty, op("producer_byte_rate", 1, false)),
	)
	bad := int16(protocol.InvalidRequest)
	if !slices.Equal(codes, []int16{0, 0, bad, bad, bad, bad}) {
		t.Fatalf("codes %v", codes)
	}
	want := []cluster.Quota{{ClientID: "billing", ProduceBytesPerSec: 50}, {ClientID: "", FetchBytesPerSec: 1000}}
	if !slices.Equal(a.quotas, want) {
		t.Fatalf("quotas set %+v, want %+v", a.quotas, want)
	}
	if codes := alter("root", true, entry("client-id", &billing, op("producer_byte_rate", 7, false))); !slices.Equal(codes, []int16{0}) || len(a.quotas) != 2 {
		t.Fatalf("validate only: codes %v, %d quotas set", codes, len(a.quotas))
	}
	if codes := alter("alice", false, entry("client-id", &billing, op("producer_byte_rate", 7, false))); !slices.Equal(codes, []int16{int16(protocol.ClusterAuthorizationFailed)}) || len(a.quotas) != 2 {
		t.Fatalf("alice: codes %v, %d quotas set", codes, len(a.quotas))
	}
}
