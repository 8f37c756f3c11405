package httpapi

import (
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/frontend/internal/fetch"
)

// Bounds of GET /v1/topics/{topic}/partitions/{p}/records. Values above the
// maxima are lowered to them, as a Kafka broker caps fetch.max.bytes.
const (
	defaultFetchBytes = 1 << 20
	maxFetchBytes     = 16 << 20
	defaultFetchWait  = 500 * time.Millisecond
	maxFetchWait      = 30 * time.Second
)

// fetchRecords serves GET /v1/topics/{topic}/partitions/{p}/records
// ?offset=N|earliest|latest&max_bytes=B&max_wait_ms=W
// &isolation=read_uncommitted|read_committed, answering JSON, or msgpack
// with raw bytes when the client accepts application/msgpack.
func (s *Server) fetchRecords(ctx *fasthttp.RequestCtx, topic, partition string) {
	req, err := parseFetch(ctx, topic, partition)
	if err != nil {
		service.WriteCode(ctx, protocol.CodeOf(err), err.Error())
		return
	}
	quota, ok := s.admitQuota(ctx, quotaFetch, 0)
	if !ok {
		return
	}
	// Under base: a long-poll ends when shutdown begins.
	res, err := s.fetcher.Fetch(s.base, req)
	if err != nil {
		if s.base.Err() != nil {
			service.WriteCode(ctx, protocol.BrokerNotAvailable, "the frontend is shutting down")
			return
		}
		writeErr(ctx, err)
		return
	}
	defer res.Release()
	s.chargeQuota(quota, len(res.Payload))
	buf := make([]byte, 0, 64+2*len(res.Payload))
	contentType := "application/json"
	if acceptsMsgpack(string(ctx.Request.Header.Peek("Accept"))) {
		buf, err = fetch.AppendMsgpack(buf, res)
		contentType = "application/msgpack"
	} else {
		buf, err = fetch.AppendJSON(buf, res)
	}
	if err != nil {
		writeErr(ctx, err)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(contentType)
	ctx.SetBody(buf)
}

// parseFetch reads the route's topic and partition and the query; its
// errors carry the code to answer with.
func parseFetch(ctx *fasthttp.RequestCtx, topic, partition string) (fetch.Request, error) {
	req := fetch.Request{Topic: topic, MaxBytes: defaultFetchBytes, MaxWait: defaultFetchWait}
	if err := cluster.ValidateTopicName(topic); err != nil {
		return req, protocol.InvalidTopic.Err("%v", err)
	}
	p, ok := pathNumber(partition)
	if !ok {
		return req, protocol.InvalidRequest.Err("partition %q is not a partition number", partition)
	}
	req.Partition = p
	args := ctx.QueryArgs()
	switch v := string(args.Peek("offset")); v {
	case "":
		return req, protocol.InvalidRequest.Err("offset is missing (a number, earliest or latest)")
	case "earliest":
		req.Offset = fetch.OffsetEarliest
	case "latest":
		req.Offset = fetch.OffsetLatest
	default:
		var err error
		if req.Offset, err = strconv.ParseInt(v, 10, 64); err != nil || req.Offset < 0 {
			return req, protocol.InvalidRequest.Err("offset %q is not a non-negative number, earliest or latest", v)
		}
	}
	if v := args.Peek("max_bytes"); len(v) > 0 {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 1 {
			return req, protocol.InvalidFetchSize.Err("max_bytes %q must be a positive number (at most %d)", v, maxFetchBytes)
		}
		req.MaxBytes = int32(min(n, maxFetchBytes))
	}
	if v := args.Peek("max_wait_ms"); len(v) > 0 {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 0 {
			return req, protocol.InvalidRequest.Err("max_wait_ms %q must be a non-negative number (at most %d)", v, maxFetchWait.Milliseconds())
		}
		req.MaxWait = min(time.Duration(n)*time.Millisecond, maxFetchWait)
	}
	switch v := string(args.Peek("isolation")); v {
	case "", "read_uncommitted":
	case "read_committed":
		req.Isolation = protocol.ReadCommitted
	default:
		return req, protocol.InvalidRequest.Err("isolation %q is not read_uncommitted or read_committed", v)
	}
	return req, nil
}

// acceptsMsgpack reports whether an Accept header asks for msgpack.
func acceptsMsgpack(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case "application/msgpack", "application/x-msgpack", "application/vnd.msgpack":
			return true
		}
	}
	return false
}

// pathNumber parses a partition number or node id from a path: a
// non-negative 32-bit decimal.
func pathNumber(s string) (int32, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	return int32(n), err == nil && n >= 0
}
