package kafka

import (
	"bytes"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/protocol"
)

// bufConn is a net.Conn writing into a buffer, for encoding tests.
type bufConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *bufConn) Write(p []byte) (int, error) { return c.buf.Write(p) }

func (c *bufConn) SetWriteDeadline(time.Time) error { return nil }

// writeBody renders a Body to bytes.
func writeBody(t *testing.T, b Body) []byte {
	t.Helper()
	bc := &bufConn{}
	w := &Writer{c: &Conn{nc: bc}}
	if err := b.WriteBody(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if bc.buf.Len() != b.Len() {
		t.Fatalf("body wrote %d bytes, said %d", bc.buf.Len(), b.Len())
	}
	return bc.buf.Bytes()
}

// TestFetchBodyMatchesKmsg checks the streamed FetchResponse against
// kmsg's encoding at every version served, with records, empty and error
// partitions, aborted transactions, leader hints and node endpoints.
func TestFetchBodyMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for v := int16(4); v <= 16; v++ {
		for round := 0; round < 20; round++ {
			fb := &FetchBody{Version: v, ThrottleMillis: rng.Int32N(100), SessionID: 0}
			want := kmsg.NewPtrFetchResponse()
			want.Version, want.ThrottleMillis = v, fb.ThrottleMillis
			for ti := 0; ti < 1+rng.IntN(3); ti++ {
				ft := FetchTopic{Topic: "topic-" + string(rune('a'+ti)), TopicID: [16]byte{byte(ti + 1), 2, 3}}
				kt := kmsg.NewFetchResponseTopic()
				kt.Topic, kt.TopicID = ft.Topic, ft.TopicID
				for pi := 0; pi < 1+rng.IntN(4); pi++ {
					fp := NewFetchPartition(int32(pi))
					kp := kmsg.NewFetchResponseTopicPartition()
					kp.Partition = int32(pi)
					fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = rng.Int64N(1e9), rng.Int64N(1e9), rng.Int64N(1e6)
					kp.HighWatermark, kp.LastStableOffset, kp.LogStartOffset = fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset
					kp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
					for range rng.IntN(3) {
						a := protocol.AbortedTxn{ProducerID: rng.Int64N(1e6), FirstOffset: rng.Int64N(1e9)}
						fp.Aborted = append(fp.Aborted, a)
						ka := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
						ka.ProducerID, ka.FirstOffset = a.ProducerID, a.FirstOffset
						kp.AbortedTransactions = append(kp.AbortedTransactions, ka)
					}
					switch rng.IntN(4) {
					case 0:
						fp.ErrorCode, kp.ErrorCode = 6, 6
						if v >= 12 {
							fp.Leader.LeaderID, fp.Leader.LeaderEpoch = 7, 3
							kp.CurrentLeader = fp.Leader
						}
						kp.RecordBatches = []byte{}
					case 1:
						fp.PreferredReadReplica, kp.PreferredReadReplica = 2, 2
						kp.RecordBatches = []byte{}
					default:
						recs := make([]byte, 1+rng.IntN(300))
						for i := range recs {
							recs[i] = byte(rng.IntN(256))
						}
						fp.Records, kp.RecordBatches = BytesRecords(recs), recs
					}
					ft.Partitions = append(ft.Partitions, fp)
					kt.Partitions = append(kt.Partitions, kp)
				}
				fb.Topics = append(fb.Topics, ft)
				want.Topics = append(want.Topics, kt)
			}
			if v >= 16 && round%2 == 0 {
				br := kmsg.NewFetchResponseBroker()
				rack := "r1"
				br.NodeID, br.Host, br.Port, br.Rack = 7, "127.0.0.1", 9092, &rack
				fb.Brokers, want.Brokers = []kmsg.FetchResponseBroker{br}, []kmsg.FetchResponseBroker{br}
			}
			fb.Encode()
			got := writeBody(t, fb)
			if exp := want.AppendTo(nil); !bytes.Equal(got, exp) {
				t.Fatalf("v%d round %d: streamed fetch response differs from kmsg's\n got %x\nwant %x", v, round, got, exp)
			}
			back := kmsg.NewPtrFetchResponse()
			back.Version = v
			if err := back.ReadFrom(got); err != nil {
				t.Fatalf("v%d: kmsg cannot read the streamed response: %v", v, err)
			}
		}
	}
}
