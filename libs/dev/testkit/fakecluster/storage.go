package fakecluster

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Storage is a fake storage node on 127.0.0.1 that serves Produce, Fetch,
// ListOffsets and DescribeReplicas. Produce checks each batch with record.Validate, stamps base
// offsets, answers a duplicate idempotent batch (same producer id, epoch and
// base sequence) with its first offsets, and keeps what it appended; Fetch
// long-polls and answers whole batches as the real node does (at least one,
// then as many as fit in MaxBytes). Every appended record counts as
// replicated: the high watermark is the log end. It is safe for concurrent
// use.
type Storage struct {
	ln net.Listener
	wg sync.WaitGroup // the accept loop, connection and fetch goroutines

	mu          sync.Mutex
	conns       map[net.Conn]struct{}                                 // open connections; guarded by mu
	logs        map[string]*partitionLog                              // by "topic/partition"; guarded by mu
	appended    map[string][]Appended                                 // by "topic/partition"; guarded by mu
	attempts    map[string]int                                        // produce requests by "topic/partition"; guarded by mu
	fetches     map[string]int                                        // fetch requests by "topic/partition"; guarded by mu
	changed     chan struct{}                                         // closed and replaced on every append; guarded by mu
	reject      func(req *protocol.ProduceRequest, attempt int) error // guarded by mu
	loseAnswer  func(req *protocol.ProduceRequest, attempt int) bool  // guarded by mu
	rejectFetch func(req *protocol.FetchRequest, attempt int) error   // guarded by mu
	done        chan struct{}                                         // closed by Close
}

// NewStorage starts a fake storage node. Close it when done.
func NewStorage() (*Storage, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Storage{
		ln: ln, conns: map[net.Conn]struct{}{}, logs: map[string]*partitionLog{},
		appended: map[string][]Appended{}, attempts: map[string]int{}, fetches: map[string]int{},
		changed: make(chan struct{}), done: make(chan struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// StartStorages starts n fake storage nodes, closed when the test ends,
// and returns them with their registrations as nodes 1..n.
func StartStorages(t testing.TB, n int) ([]*Storage, []cluster.Node) {
	t.Helper()
	var nodes []*Storage
	var regs []cluster.Node
	for i := range n {
		s, err := NewStorage()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		nodes = append(nodes, s)
		regs = append(regs, cluster.Node{ID: int32(i + 1), Addr: s.Addr(), Alive: true})
	}
	return nodes, regs
}

// Addr returns the node's address.
func (s *Storage) Addr() string { return s.ln.Addr().String() }

// Close stops the listener, ends long-polls, closes connections and waits for
// goroutines. It may be called more than once.
func (s *Storage) Close() {
	_ = s.ln.Close()
	s.mu.Lock()
	select {
	case <-s.done:
	default:
		close(s.done)
	}
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

// SetLoseAnswer installs a hook that, when it returns true, makes the node
// close the connection instead of answering a produce request it has just
// appended: the answer is lost, as when a node or link fails at that moment.
func (s *Storage) SetLoseAnswer(f func(req *protocol.ProduceRequest, attempt int) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loseAnswer = f
}

// SetFetchReject installs a hook that may refuse a fetch request with an
// error; attempt counts the fetches of that partition, from 1.
func (s *Storage) SetFetchReject(f func(req *protocol.FetchRequest, attempt int) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectFetch = f
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

// Fetches returns how many fetch requests reached a partition.
func (s *Storage) Fetches(topic string, partition int32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches[key(topic, partition)]
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

// connWriter serialises the answers of one connection.
type connWriter struct {
	mu  sync.Mutex
	enc *protocol.Encoder
	w   *bufio.Writer
}

func (cw *connWriter) answer(id uint32, body protocol.Body, payload []byte, err error) error {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	rh := protocol.ResponseHeader{CorrelationID: id, ErrorCode: protocol.CodeOf(err)}
	if err != nil {
		rh.ErrorMessage, body, payload = err.Error(), nil, nil
	}
	out, eerr := cw.enc.Response(&rh, body, len(payload))
	if eerr != nil {
		return eerr
	}
	if _, werr := cw.w.Write(out); werr != nil {
		return werr
	}
	if _, werr := cw.w.Write(payload); werr != nil {
		return werr
	}
	return cw.w.Flush()
}

// serveConn reads requests in order. Produce, ListOffsets and
// DescribeReplicas are answered inline, so a connection's produce requests
// are appended in the order they arrived; fetches long-poll in their own
// goroutines, as on the real node.
func (s *Storage) serveConn(c net.Conn) {
	fr := protocol.NewFrameReader(c, 0)
	dec := protocol.NewDecoder()
	cw := &connWriter{enc: protocol.NewEncoder(), w: bufio.NewWriter(c)}
	for {
		frame, err := fr.Next()
		if err != nil {
			return
		}
		var h protocol.RequestHeader
		if err := dec.Request(frame, &h); err != nil {
			return
		}
		switch h.APIKey {
		case protocol.APIProduce:
			resp, lose, err := s.produce(dec)
			if lose {
				return
			}
			if cw.answer(h.CorrelationID, &resp, nil, err) != nil {
				return
			}
		case protocol.APIListOffsets:
			resp, err := s.listOffsets(dec)
			if cw.answer(h.CorrelationID, &resp, nil, err) != nil {
				return
			}
		case protocol.APIDescribeReplicas:
			resp, err := s.describeReplicas(dec)
			if cw.answer(h.CorrelationID, &resp, nil, err) != nil {
				return
			}
		case protocol.APIFetch:
			var req protocol.FetchRequest
			if err := dec.Body(&req); err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				resp, payload, err := s.fetch(&req)
				if cw.answer(h.CorrelationID, &resp, payload, err) != nil {
					_ = c.Close()
				}
			}()
		default:
			err := protocol.UnknownAPI.Err("fake storage does not serve %v", h.APIKey)
			if cw.answer(h.CorrelationID, nil, nil, err) != nil {
				return
			}
		}
	}
}

// codeErr turns a hook's error into a *protocol.Error.
func codeErr(err error) error {
	var pe *protocol.Error
	if err != nil && !errors.As(err, &pe) {
		return protocol.UnknownServerError.Err("%v", err)
	}
	return err
}
