package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/protocol"
)

// maxJSONAnswer caps the answer to one JSON produce request.
const maxJSONAnswer = 16 << 20

// jsonBody builds JSON record bodies of the frontend's produce route (the
// Confluent REST Proxy v2 shape): {"records":[{"key":"k","value":"v",
// "timestamp":ms},...]}. Keys and values are printable (keyAlphabet), so they
// go as JSON strings as they are; e2e values carry a binary stamp and go as
// value_b64. It is not safe for concurrent use.
type jsonBody struct {
	keys  KeyGen
	value []byte // the payload; e2e stamps its first 8 bytes
	e2e   bool
	buf   []byte
}

// build returns a body of n records sent at sentAt; the bytes are reused by
// the next call.
func (j *jsonBody) build(n int, sentAt time.Time) []byte {
	b := append(j.buf[:0], `{"records":[`...)
	ms := strconv.AppendInt(nil, sentAt.UnixMilli(), 10)
	if j.e2e {
		stamp(j.value, sentAt)
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		if k := j.keys.Next(); k != nil {
			b = append(b, `"key":"`...)
			b = append(b, k...)
			b = append(b, `",`...)
		}
		if j.e2e {
			b = append(b, `"value_b64":"`...)
			b = base64.StdEncoding.AppendEncode(b, j.value)
		} else {
			b = append(b, `"value":"`...)
			b = append(b, j.value...)
		}
		b = append(b, `","timestamp":`...)
		b = append(b, ms...)
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	j.buf = b
	return b
}

// jsonAnswer is the frontend's answer to a record body: one offset entry per
// record, in request order; a request-level error adds the error fields (a
// 504 keeps the entries, other errors have none).
type jsonAnswer struct {
	ErrorCode int16  `json:"error_code"`
	Error     string `json:"error"`
	Offsets   []struct {
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		ErrorCode int16  `json:"error_code"`
		Error     string `json:"error"`
	} `json:"offsets"`
}

// jsonPoster posts JSON record bodies of --json-batch records to one
// frontend, one request in flight, until the plan says stop or ctx ends.
// Requests run under drain, so one in flight at an interrupt may still get
// its answer. It runs on its own goroutine, owned by the run.
func (r *run) jsonPoster(ctx, drain context.Context, i int, pacer *Pacer) {
	base := r.cfg.Frontends[i%len(r.cfg.Frontends)]
	u := base + "/v1/topics/" + url.PathEscape(r.cfg.Topic) + "/records?acks=" + acksName(r.cfg.Acks)
	tr := &http.Transport{MaxIdleConnsPerHost: 2}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	body := &jsonBody{keys: r.cfg.Keys.NewGen(r.seed+uint64(i), i), value: newValue(r.cfg.RecordSize, r.seed+uint64(i)), e2e: r.cfg.Mode == ModeE2E}
	lat := r.prod.lats[i]
	for {
		sentAt, ok := pace(ctx, pacer, r.cfg.JSONBatch)
		if !ok {
			return
		}
		n, counted := r.plan.take(sentAt, r.cfg.JSONBatch)
		if n == 0 {
			return
		}
		b := body.build(n, sentAt)
		r.prod.sent.Add(int64(n))
		ans, err := postRecords(drain, hc, u, b, n, sentAt.Add(r.cfg.DeliveryTimeout))
		if err != nil {
			if drain.Err() != nil {
				err = errUnanswered
			}
			r.prod.outcome(lat, sentAt, counted, r.cfg.RecordSize, int64(n), client.RecordMetadata{Err: err})
			continue
		}
		r.jsonOutcomes(lat, sentAt, counted, ans)
	}
}

// jsonOutcomes accounts for the entries of an answer; successful records of
// one request share its latency.
func (r *run) jsonOutcomes(lat *Latencies, sentAt time.Time, counted bool, ans *jsonAnswer) {
	ok := int64(0)
	for _, o := range ans.Offsets {
		m := client.RecordMetadata{Topic: r.cfg.Topic, Partition: o.Partition, Offset: o.Offset}
		if o.ErrorCode != 0 || o.Error != "" {
			m.Err = answerError(o.ErrorCode, o.Error)
			r.prod.outcome(lat, sentAt, counted, r.cfg.RecordSize, 1, m)
			continue
		}
		if r.prod.tracker != nil {
			r.prod.outcome(lat, sentAt, counted, r.cfg.RecordSize, 1, m)
			continue
		}
		ok++
	}
	if ok > 0 {
		r.prod.outcome(lat, sentAt, counted, r.cfg.RecordSize, ok, client.RecordMetadata{Offset: -1})
	}
}

// postRecords posts one body of n records and returns the answer, with one
// entry per record. A request refused whole for a reason that may pass
// (429 THROTTLING_QUOTA_EXCEEDED, where nothing was produced, or another
// retriable code) is sent again after a backoff until deadline; the records'
// own errors are the caller's.
func postRecords(ctx context.Context, hc *http.Client, u string, body []byte, n int, deadline time.Time) (*jsonAnswer, error) {
	backoff := 50 * time.Millisecond
	for {
		ans, status, err := postOnce(ctx, hc, u, body, deadline)
		if err == nil && len(ans.Offsets) == n {
			return ans, nil
		}
		if err == nil {
			err = fmt.Errorf("HTTP %d with %d offsets for %d records", status, len(ans.Offsets), n)
			if ans.Error != "" {
				err = answerError(ans.ErrorCode, ans.Error)
			}
			retriable := len(ans.Offsets) == 0 && (status == http.StatusTooManyRequests || protocol.Code(ans.ErrorCode).Retriable())
			if !retriable {
				return nil, err
			}
		}
		if ctx.Err() != nil || time.Until(deadline) < backoff {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// postOnce sends the body once; err is a transport error or an answer that
// is not JSON.
func postOnce(ctx context.Context, hc *http.Client, u string, body []byte, deadline time.Time) (*jsonAnswer, int, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONAnswer))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("reading the answer: %w", err)
	}
	var ans jsonAnswer
	if err := json.Unmarshal(data, &ans); err != nil {
		return nil, resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(data[:min(len(data), 200)]))
	}
	return &ans, resp.StatusCode, nil
}

// answerError is an error of the frontend's answer. Its message already
// starts with the code's name ("NOT_ENOUGH_REPLICAS: ..."), so it is kept
// as it is.
func answerError(code int16, msg string) error {
	if msg == "" {
		return &protocol.Error{Code: protocol.Code(code)}
	}
	return errors.New(msg)
}

// acksName is the acks query parameter of the produce route.
func acksName(acks int8) string {
	switch acks {
	case protocol.AcksLeader:
		return "leader"
	case protocol.AcksNone:
		return "none"
	}
	return "all"
}
