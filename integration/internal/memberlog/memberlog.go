// Package memberlog is the output of the integration tests' group member
// commands (sluice-testmember, sluice-kafkamember, sluice-sharemember): one
// JSON line per event, flushed at once, so a test that kills a member with
// SIGKILL still knows what it owned and processed until then.
package memberlog

import (
	"bufio"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Event is one output line.
type Event struct {
	Ev        string `json:"ev"` // assign, revoke, lost, rec, commit, error, closed
	Time      int64  `json:"t"`  // Unix nanoseconds
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
	Value     string `json:"v,omitempty"`
	Err       string `json:"err,omitempty"`
	// A share consumer's delivery count, and an acknowledgement's kind.
	Count int16  `json:"n,omitempty"`
	Ack   string `json:"ack,omitempty"`
}

// Log writes events; it is safe for concurrent use.
type Log struct {
	mu sync.Mutex
	w  *bufio.Writer
}

// New returns a Log writing to w.
func New(w io.Writer) *Log { return &Log{w: bufio.NewWriter(w)} }

// Emit stamps e with the time and writes it.
func (l *Log) Emit(e Event) {
	e.Time = time.Now().UnixNano()
	b, _ := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(append(b, '\n'))
	l.w.Flush()
}

// Partitions emits one event of kind ev per partition of m.
func (l *Log) Partitions(ev string, m map[string][]int32) {
	for t, ps := range m {
		for _, p := range ps {
			l.Emit(Event{Ev: ev, Topic: t, Partition: p})
		}
	}
}
