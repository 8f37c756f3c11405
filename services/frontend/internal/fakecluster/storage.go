package fakecluster

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// Appended is one produce request a Storage node accepted.
type Appended struct {
	Req        protocol.ProduceRequest
	BaseOffset int64
	Records    []record.Record
}

// Storage is a fake storage node on 127.0.0.1 that serves Produce: it checks
// each batch with record.Validate, assigns offsets per partition and keeps
// what it appended. It is safe for concurrent use.
type Storage struct {
	ln net.Listener
	wg sync.WaitGroup // the accept loop and connection goroutines

	mu       sync.Mutex
	conns    map[net.Conn]struct{}                                 // open connections; guarded by mu
	next     map[string]int64                                      // "topic/partition" -> next offset; guarded by mu
	appended map[string][]Appended                                 // by "topic/partition"; guarded by mu
	attempts map[string]int                                        // produce requests by "topic/partition"; guarded by mu
	reject   func(req *protocol.ProduceRequest, attempt int) error // guarded by mu
}

// NewStorage starts a fake storage node. Close it when done.
func NewStorage() (*Storage, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Storage{
		ln: ln, conns: map[net.Conn]struct{}{}, next: map[string]int64{},
		appended: map[string][]Appended{}, attempts: map[string]int{},
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr returns the node's address.
func (s *Storage) Addr() string { return s.ln.Addr().String() }

// Close stops the listener, closes connections and waits for goroutines.
func (s *Storage) Close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// SetReject installs a hook that may refuse a produce request with an error
// (a *protocol.Error becomes the response's code); attempt counts the
// requests for that partition, from 1.
func (s *Storage) SetReject(f func(req *protocol.ProduceRequest, attempt int) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reject = f
}

// Appended returns what the node appended to a partition, in order.
func (s *Storage) Appended(topic string, partition int32) []Appended {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Appended(nil), s.appended[key(topic, partition)]...)
}

// Attempts returns how many produce requests reached a partition.
func (s *Storage) Attempts(topic string, partition int32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[key(topic, partition)]
}

func key(topic string, partition int32) string { return fmt.Sprintf("%s/%d", topic, partition) }

func (s *Storage) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			_ = c.Close()
		}()
	}
}

// serveConn answers requests in order, one at a time.
func (s *Storage) serveConn(c net.Conn) {
	fr := protocol.NewFrameReader(c, 0)
	dec := protocol.NewDecoder()
	enc := protocol.NewEncoder()
	w := bufio.NewWriter(c)
	for {
		frame, err := fr.Next()
		if err != nil {
			return
		}
		var h protocol.RequestHeader
		if err := dec.Request(frame, &h); err != nil {
			return
		}
		var resp protocol.ProduceResponse
		var rerr error
		if h.APIKey != protocol.APIProduce {
			rerr = protocol.UnknownAPI.Err("fake storage serves Produce only, not %v", h.APIKey)
		} else {
			resp, rerr = s.produce(dec)
		}
		rh := protocol.ResponseHeader{CorrelationID: h.CorrelationID, ErrorCode: protocol.CodeOf(rerr)}
		var body protocol.Body = &resp
		if rerr != nil {
			rh.ErrorMessage = rerr.Error()
			body = nil
		}
		out, err := enc.Response(&rh, body, 0)
		if err != nil {
			return
		}
		if _, err := w.Write(out); err != nil || w.Flush() != nil {
			return
		}
	}
}

func (s *Storage) produce(dec *protocol.Decoder) (protocol.ProduceResponse, error) {
	var req protocol.ProduceRequest
	if err := dec.Body(&req); err != nil {
		return protocol.ProduceResponse{}, protocol.MalformedFrame.Err("%v", err)
	}
	payload := append([]byte(nil), dec.Payload()...)
	var count int64
	for rest := payload; len(rest) > 0; {
		h, err := record.Validate(rest)
		if err != nil {
			return protocol.ProduceResponse{}, protocol.CorruptRecord.Err("%v", err)
		}
		count += int64(h.RecordCount)
		rest = rest[h.Size():]
	}
	if count == 0 {
		return protocol.ProduceResponse{}, protocol.InvalidRequest.Err("no records")
	}
	var recs []record.Record
	it := record.NewIterator(payload)
	for it.Next() {
		r := it.Record()
		recs = append(recs, record.Record{Timestamp: r.Timestamp, Key: clone(r.Key), Value: clone(r.Value), Headers: cloneHeaders(r.Headers)})
	}
	if err := it.Err(); err != nil {
		return protocol.ProduceResponse{}, protocol.CorruptRecord.Err("%v", err)
	}
	k := key(req.Topic, req.Partition)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts[k]++
	if s.reject != nil {
		if err := s.reject(&req, s.attempts[k]); err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				err = protocol.UnknownServerError.Err("%v", err)
			}
			return protocol.ProduceResponse{}, err
		}
	}
	base := s.next[k]
	s.next[k] = base + count
	s.appended[k] = append(s.appended[k], Appended{Req: req, BaseOffset: base, Records: recs})
	return protocol.ProduceResponse{BaseOffset: base, LastOffset: base + count - 1, LogAppendTime: -1}, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func cloneHeaders(hs []record.RecordHeader) []record.RecordHeader {
	var out []record.RecordHeader
	for _, h := range hs {
		out = append(out, record.RecordHeader{Key: h.Key, Value: clone(h.Value)})
	}
	return out
}
