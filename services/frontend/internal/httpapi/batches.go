package httpapi

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/frontendapi"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/libs/txns"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
	"github.com/sluicemq/sluice/services/frontend/internal/txnjoin"
)

// batchesAnswer is frontendapi.BatchesResponse, with the error body's fields
// when the request as a whole failed (a timeout: HTTP 504).
type batchesAnswer struct {
	ErrorCode int16  `json:"error_code,omitempty"`
	Error     string `json:"error,omitempty"`
	frontendapi.BatchesResponse
}

// produceBatches serves a batches body (frontendapi.ContentTypeBatches):
// each batch's bytes go to its partition's leader undecoded. A body that is
// not one, or a batch whose header is wrong, is refused whole (400) before
// anything is sent; a batch the leader refuses (CORRUPT_RECORD after its CRC
// check, say) is a result entry with the leader's code, and the partition's
// later batches in the body are not sent.
//
// With txnID (the transactional_id parameter) every batch must be
// transactional, of one producer, and acks must be all: the partitions join
// the producer's transaction (version 2, package txnjoin) before anything
// is sent. A transactional batch without txnID is refused: nothing would
// end the transaction it opens.
func (s *Server) produceBatches(ctx *fasthttp.RequestCtx, id, topic string, acks int8, txnID string, body []byte) {
	batches, err := frontendapi.DecodeBatches(body)
	if err != nil {
		service.WriteCode(ctx, protocol.InvalidRequest, err.Error())
		return
	}
	_, transactional, err := produce.CheckBatches(batches)
	if err != nil {
		code := protocol.CorruptRecord
		if !errors.Is(err, produce.ErrBadBatch) {
			code = protocol.InvalidRequest
		}
		service.WriteCode(ctx, code, err.Error())
		return
	}
	if err := s.joinTxn(ctx, topic, acks, txnID, transactional, batches); err != nil {
		writeErr(ctx, err)
		return
	}
	// As for record bodies, the request finishes even if shutdown begins.
	results, err := s.producer.ProduceBatches(context.Background(), topic, acks, batches)
	if err != nil && !errors.Is(err, produce.ErrTimedOut) {
		writeErr(ctx, err)
		return
	}
	failed, first := 0, ""
	for i := range results {
		if results[i].ErrorCode != 0 {
			if failed == 0 {
				first = results[i].Error
			}
			failed++
		}
	}
	if failed > 0 {
		s.log.Warn("batches not produced", "request_id", id, "topic", topic, "failed", failed, "batches", len(results), "first_error", first)
	}
	ans := batchesAnswer{BatchesResponse: frontendapi.BatchesResponse{Results: results}}
	status := fasthttp.StatusOK
	if err != nil {
		status = fasthttp.StatusGatewayTimeout
		ans.ErrorCode, ans.Error = int16(protocol.CodeOf(err)), err.Error()
	}
	service.WriteJSON(ctx, status, ans)
}

// joinTxn brings a transactional body's partitions into its producer's
// transaction, and refuses transactional batches (transactional: the body
// holds some) outside one.
func (s *Server) joinTxn(ctx *fasthttp.RequestCtx, topic string, acks int8, txnID string, transactional bool, batches []frontendapi.PartitionBatch) error {
	if txnID == "" {
		if transactional {
			return protocol.InvalidRecord.Err("a transactional batch needs the transactional_id parameter")
		}
		return nil
	}
	if err := txns.ValidateID(txnID); err != nil {
		return protocol.InvalidRequest.Err("%v", err)
	}
	if acks != protocol.AcksAll {
		return protocol.InvalidRequiredAcks.Err("a transactional producer writes with acks=all")
	}
	if s.txns == nil {
		return protocol.InvalidRequest.Err("this frontend has no transaction coordinator")
	}
	req := txnjoin.NewRequest(true)
	for _, pb := range batches {
		if err := req.Add(topic, pb.Partition, pb.Batch); err != nil {
			return err
		}
	}
	client := s.txns
	if p, _ := ctx.UserValue(principalKey).(*cluster.Principal); p != nil {
		client = client.For(p.Name, p.Host)
	}
	jctx, cancel := context.WithTimeout(context.Background(), s.producer.Config().Timeout)
	defer cancel()
	return s.joiner.Join(jctx, client, txnID, req)
}
