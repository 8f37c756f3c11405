package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/services/frontend/internal/fetch"
)

// shareRecords serves POST /v1/share-groups/{group}/records?topic=T
// [&max=N][&wait_ms=W][&member=ID]: it acquires records for the member
// (a new member id when none is given) at the offsets service, reads them
// from the partition leaders and answers
//
//	{"member_id":"...","lock_until_ms":N,"records":[{"topic":"t","partition":0,
//	  "delivery_count":1,"offset":42,"timestamp":...,"key":...,"value":...}]}
//
// The member acknowledges them with POST /v1/share-groups/{group}/acks
// (relayed to the offsets service) before lock_until_ms. Offsets of an
// acquired range that hold no record (compacted away, transaction markers)
// are acknowledged as gaps here.
func (s *Server) shareRecords(ctx *fasthttp.RequestCtx, group string) {
	req, err := parseShareAcquire(ctx)
	if err != nil {
		service.WriteCode(ctx, protocol.CodeOf(err), err.Error())
		return
	}
	if err := groups.ValidateGroupID(group); err != nil {
		service.WriteCode(ctx, protocol.InvalidGroupID, err.Error())
		return
	}
	rctx, cancel := context.WithTimeout(s.base, time.Duration(req.WaitMs)*time.Millisecond+s.cfg.AdminTimeout)
	defer cancel()
	var acquired shares.AcquireResponse
	if !s.offsetsCall(ctx, rctx, shares.Path(group)+"/acquire", req, &acquired) {
		return
	}
	b := make([]byte, 0, 4096)
	b = append(b, `{"member_id":`...)
	b = strconv.AppendQuote(b, req.MemberID)
	b = append(b, `,"lock_until_ms":`...)
	b = strconv.AppendInt(b, acquired.LockUntilMs, 10)
	b = append(b, `,"records":[`...)
	first := true
	var acks []shares.Ack // gaps and deferrals
	delayMs, now := shares.TopicDelayMs(s.cache.Snapshot(), req.Topic), time.Now().UnixMilli()
	for _, ranges := range shares.ByPartition(acquired.Acquired) {
		got, err := s.fetcher.ReadAcquired(rctx, ranges, delayMs, now, nil, func(r *record.Record, a shares.Acquired) {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = fetch.AppendSharedJSON(b, a.Topic, a.Partition, a.DeliveryCount, r)
		})
		if err != nil {
			// The answer is an error: everything goes back at once
			// rather than at the lock's expiry.
			s.shareAcks(rctx, group, req.MemberID, shares.Releases(acquired.Acquired))
			writeErr(ctx, err)
			return
		}
		acks = append(append(acks, got.Gaps...), got.Defers...)
	}
	s.shareAcks(rctx, group, req.MemberID, acks)
	b = append(b, "]}"...)
	ctx.SetStatusCode(http.StatusOK)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// parseShareAcquire reads the query of POST .../records.
func parseShareAcquire(ctx *fasthttp.RequestCtx) (shares.AcquireRequest, error) {
	args := ctx.QueryArgs()
	req := shares.AcquireRequest{Topic: string(args.Peek("topic")), MemberID: string(args.Peek("member"))}
	if err := cluster.ValidateTopicName(req.Topic); err != nil {
		return req, protocol.InvalidTopic.Err("query parameter topic: %v", err)
	}
	if req.MemberID == "" {
		req.MemberID = groups.NewMemberID("http")
	}
	for _, q := range []struct {
		name string
		max  int64
		to   *int32
	}{{"max", 10_000, &req.MaxRecords}, {"wait_ms", maxFetchWait.Milliseconds(), &req.WaitMs}} {
		v := args.Peek(q.name)
		if len(v) == 0 {
			continue
		}
		n, err := strconv.ParseInt(string(v), 10, 32)
		if err != nil || n < 0 {
			return req, protocol.InvalidRequest.Err("query parameter %s=%q is not a count", q.name, v)
		}
		*q.to = int32(min(n, q.max))
	}
	return req, nil
}

// shareAcks sends acknowledgements the frontend makes itself (gaps,
// deferrals, and releases of what it could not read); a failure leaves them
// to the lock's expiry.
func (s *Server) shareAcks(rctx context.Context, group, member string, acks []shares.Ack) {
	if len(acks) == 0 {
		return
	}
	resp, err := s.offsets.Forward(rctx, http.MethodPost, shares.Path(group)+"/acks", jsonHeader(), mustJSON(shares.AckRequest{MemberID: member, Acks: acks}))
	if err != nil || resp.Status != http.StatusOK {
		s.log.Warn("acknowledging a share group's gaps failed; their locks will expire", "group", group, "err", err)
	}
}

// offsetsCall posts a JSON body to the offsets service for the request's
// principal and decodes the answer into out. On failure it answers ctx
// with the offsets service's answer (or the error) and returns false.
func (s *Server) offsetsCall(ctx *fasthttp.RequestCtx, rctx context.Context, path string, in, out any) bool {
	h := jsonHeader()
	h.Set(headerRequestID, requestID(ctx))
	if p, ok := ctx.UserValue(principalKey).(*cluster.Principal); ok {
		h.Set(service.PrincipalHeader, p.Name)
		h.Set(service.ClientHostHeader, p.Host)
	}
	resp, err := s.offsets.Forward(rctx, http.MethodPost, path, h, mustJSON(in))
	if err != nil {
		service.WriteCode(ctx, protocol.NetworkException, "offsets service: "+err.Error())
		return false
	}
	if resp.Status != http.StatusOK {
		ctx.SetStatusCode(resp.Status)
		ctx.SetContentType("application/json")
		ctx.SetBody(resp.Body)
		return false
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		service.WriteCode(ctx, protocol.UnknownServerError, "offsets service answer: "+err.Error())
		return false
	}
	return true
}

func jsonHeader() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return h
}

// mustJSON encodes a request body of plain structs (which cannot fail).
func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
