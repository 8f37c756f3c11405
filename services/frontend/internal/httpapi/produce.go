package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
)

// produce serves POST /v1/topics/{topic}/records.
func (s *Server) produce(ctx *fasthttp.RequestCtx, id, topic string) {
	start := time.Now()
	m := s.producer.Metrics()
	defer func() {
		m.Requests.WithLabelValues(strconv.Itoa(ctx.Response.StatusCode())).Inc()
		m.Latency.Observe(time.Since(start).Seconds())
	}()
	if err := cluster.ValidateTopicName(topic); err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, protocol.InvalidTopic, err.Error())
		return
	}
	acks, err := parseAcks(string(ctx.QueryArgs().Peek("acks")))
	if err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, protocol.InvalidRequiredAcks, err.Error())
		return
	}
	format, err := produce.ParseContentType(string(ctx.Request.Header.ContentType()))
	if err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, protocol.InvalidRequest, err.Error())
		return
	}
	recs, err := produce.Parse(format, ctx.PostBody(), s.producer.Config().MaxRecords)
	if err != nil {
		if errors.Is(err, produce.ErrTooManyRecords) {
			writeError(ctx, fasthttp.StatusRequestEntityTooLarge, protocol.RecordListTooLarge, err.Error()+" (-max-records)")
		} else {
			writeError(ctx, fasthttp.StatusBadRequest, protocol.InvalidRequest, err.Error())
		}
		return
	}
	// Not the RequestCtx: it ends when shutdown starts, and a request in
	// progress should rather finish. The producer bounds it with its timeout.
	results, err := s.producer.Produce(context.Background(), topic, acks, recs)
	if err != nil {
		writeErr(ctx, err)
		return
	}
	failed := 0
	var first error
	for i := range results {
		if results[i].Err != nil {
			if failed == 0 {
				first = results[i].Err
			}
			failed++
		}
	}
	if failed > 0 {
		s.log.Warn("records not produced", "request_id", id, "topic", topic, "failed", failed, "records", len(results), "first_error", first)
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.SetBody(appendOffsets(make([]byte, 0, 16+32*len(results)), results))
}

// parseAcks reads the acks query parameter: all, leader or none, or Kafka's
// -1, 1 and 0. Absent means all.
func parseAcks(v string) (int8, error) {
	switch v {
	case "", "all", "-1":
		return protocol.AcksAll, nil
	case "leader", "1":
		return protocol.AcksLeader, nil
	case "none", "0":
		return protocol.AcksNone, nil
	}
	return 0, errors.New("acks " + strconv.Quote(v) + " is not all, leader or none (or -1, 1, 0)")
}

// appendOffsets writes {"offsets":[...]}: one entry per record in request
// order, {"partition":P,"offset":O} or {"partition":P,"error_code":C,"error":"..."}.
func appendOffsets(b []byte, results []produce.Result) []byte {
	b = append(b, `{"offsets":[`...)
	for i := range results {
		r := &results[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"partition":`...)
		b = strconv.AppendInt(b, int64(r.Partition), 10)
		if r.Err == nil {
			b = append(b, `,"offset":`...)
			b = strconv.AppendInt(b, r.Offset, 10)
		} else {
			b = append(b, `,"error_code":`...)
			b = strconv.AppendInt(b, int64(protocol.CodeOf(r.Err)), 10)
			b = append(b, `,"error":`...)
			msg, _ := json.Marshal(r.Err.Error()) // a string always encodes
			b = append(b, msg...)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}
