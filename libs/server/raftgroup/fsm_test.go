package raftgroup

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/hashicorp/raft"
)

// errMalformed is memFSM's response to a command that is not "key=value".
var errMalformed = errors.New("command is not key=value")

// memFSM is the smallest useful raft.FSM: commands are "key=value" strings.
// Apply answers with the entry's index, or errMalformed (as the response, not
// a commit failure) for anything else.
type memFSM struct {
	mu       sync.Mutex
	kv       map[string]string // guarded by mu
	last     uint64            // last applied index; guarded by mu
	restores int               // Restore calls; guarded by mu
}

func newMemFSM() *memFSM { return &memFSM{kv: map[string]string{}} }

// memState is memFSM's snapshot format.
type memState struct {
	KV   map[string]string `json:"kv"`
	Last uint64            `json:"last"`
}

func (f *memFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = l.Index
	k, v, ok := strings.Cut(string(l.Data), "=")
	if !ok || k == "" {
		return errMalformed
	}
	f.kv[k] = v
	return l.Index
}

func (f *memFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := json.Marshal(memState{KV: f.kv, Last: f.last})
	return memSnapshot(b), err
}

func (f *memFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s memState
	if err := json.NewDecoder(rc).Decode(&s); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kv, f.last = s.KV, s.Last
	if f.kv == nil {
		f.kv = map[string]string{}
	}
	f.restores++
	return nil
}

// get returns the value of key and the last applied index.
func (f *memFSM) get(key string) (string, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kv[key], f.last
}

func (f *memFSM) restoreCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restores
}

// memSnapshot is a point-in-time copy of memFSM's state, already encoded.
type memSnapshot []byte

func (s memSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (memSnapshot) Release() {}
