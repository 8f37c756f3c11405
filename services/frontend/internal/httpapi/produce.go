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
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
)

// produce serves POST /v1/topics/{topic}/records: checks what is cheap to
// check, admits the body into the in-flight budget, and serves it as
// records (JSON, msgpack) or as ready-made batches.
func (s *Server) produce(ctx *fasthttp.RequestCtx, id, topic string) {
	start := time.Now()
	m := s.producer.Metrics()
	defer func() {
		m.Requests.WithLabelValues(strconv.Itoa(ctx.Response.StatusCode())).Inc()
		m.Latency.Observe(time.Since(start).Seconds())
	}()
	if err := cluster.ValidateTopicName(topic); err != nil {
		service.WriteCode(ctx, protocol.InvalidTopic, err.Error())
		return
	}
	acks, err := parseAcks(string(ctx.QueryArgs().Peek("acks")))
	if err != nil {
		service.WriteCode(ctx, protocol.InvalidRequiredAcks, err.Error())
		return
	}
	format, err := produce.ParseContentType(string(ctx.Request.Header.ContentType()))
	if err != nil {
		service.WriteCode(ctx, protocol.InvalidRequest, err.Error())
		return
	}
	// The body was admitted into the in-flight budget before it was read
	// (admitBody) and stays in it until this answer is written.
	body := ctx.PostBody()
	if _, ok := s.admitQuota(ctx, quotaProduce, len(body)); !ok {
		return
	}
	if format != produce.FormatBatches && len(ctx.QueryArgs().Peek("transactional_id")) > 0 {
		service.WriteCode(ctx, protocol.InvalidRequest, "transactional_id applies to a batches body: a transactional producer builds its own batches")
		return
	}
	if format == produce.FormatBatches {
		s.produceBatches(ctx, id, topic, acks, string(ctx.QueryArgs().Peek("transactional_id")), body)
		return
	}
	s.produceRecords(ctx, id, topic, acks, format, body)
}

// produceRecords serves a record body: parsed, batched per partition by the
// producer, answered with one offset entry per record.
func (s *Server) produceRecords(ctx *fasthttp.RequestCtx, id, topic string, acks int8, format produce.Format, body []byte) {
	recs, err := produce.Parse(format, body, s.producer.Config().MaxRecords)
	if err != nil {
		if errors.Is(err, produce.ErrTooManyRecords) {
			service.WriteCode(ctx, protocol.RecordListTooLarge, err.Error()+" (-max-records)")
		} else {
			service.WriteCode(ctx, protocol.InvalidRequest, err.Error())
		}
		return
	}
	// Not the RequestCtx: it ends when shutdown starts, and a request in
	// progress should rather finish. The producer bounds it with its timeout.
	results, err := s.producer.Produce(context.Background(), topic, acks, recs)
	if err != nil && !errors.Is(err, produce.ErrTimedOut) {
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
	status := fasthttp.StatusOK
	if err != nil {
		status = fasthttp.StatusGatewayTimeout
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(appendOffsets(make([]byte, 0, 64+32*len(results)), results, err))
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
// With a request error (a timeout) the body starts with the error body's
// fields: {"error_code":7,"error":"...","offsets":[...]}.
func appendOffsets(b []byte, results []produce.Result, reqErr error) []byte {
	b = append(b, '{')
	if reqErr != nil {
		b = appendErrorFields(b, reqErr)
		b = append(b, ',')
	}
	b = append(b, `"offsets":[`...)
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
			b = append(b, ',')
			b = appendErrorFields(b, r.Err)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendErrorFields writes "error_code":C,"error":"...".
func appendErrorFields(b []byte, err error) []byte {
	b = append(b, `"error_code":`...)
	b = strconv.AppendInt(b, int64(protocol.CodeOf(err)), 10)
	b = append(b, `,"error":`...)
	msg, _ := json.Marshal(err.Error()) // a string always encodes
	return append(b, msg...)
}
