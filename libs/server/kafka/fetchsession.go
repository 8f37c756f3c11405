package kafka

import (
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sessions (KIP-227): a consumer's first fetch (epoch 0) names every
// partition and opens a session; its next fetches name only what changed
// (a new fetch offset, a partition added) and the partitions to forget,
// and the answers carry only the partitions with news: records, an error,
// a moved high watermark, last stable or log start offset, a preferred
// replica. A broker keeps at most FetchSessionsConfig.Slots sessions; a full
// cache evicts one idle for EvictAfter, or else the smallest for a larger
// newcomer, or answers without a session (the client goes on with full
// fetches). A session serves only the principal that opened it.

// Kafka's fetch session error codes.
const (
	codeInvalidFetchSessionEpoch = 71
	codeFetchSessionTopicIDError = 106
)

// Kafka's special session epochs.
const (
	fetchEpochInitial = 0
	fetchEpochFinal   = -1
)

// FetchSessionsConfig bounds a broker's fetch sessions.
type FetchSessionsConfig struct {
	// Slots is how many sessions the broker keeps (Kafka's
	// max.incremental.fetch.session.cache.slots); 0 keeps none.
	Slots int
	// EvictAfter is how long a session must have been unused before any
	// new one may take its slot (Kafka's
	// min.incremental.fetch.session.eviction.ms).
	EvictAfter time.Duration
}

// DefaultFetchSessionsConfig is Kafka's: 1000 slots, 2 minutes.
func DefaultFetchSessionsConfig() FetchSessionsConfig {
	return FetchSessionsConfig{Slots: 1000, EvictAfter: 2 * time.Minute}
}

// FetchSessions is a broker's cache of fetch sessions. It is safe for
// concurrent use.
type FetchSessions struct {
	cfg     FetchSessionsConfig
	now     func() time.Time
	metrics *Metrics

	mu       sync.Mutex
	next     int32
	sessions map[int32]*fetchSession
	evicted  int64
}

// fetchSession is one session: its partitions in answer order.
type fetchSession struct {
	id        int32
	principal string
	usesIDs   bool // v13+: topics by id
	epoch     int32
	used      time.Time
	parts     []*sessionPart
	index     map[sessionKey]*sessionPart
}

// sessionKey names a partition by topic name (v7-12) or id (v13+).
type sessionKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// sessionPart is one partition of a session: what the client last asked
// and what it was last told.
type sessionPart struct {
	key               sessionKey
	req               kmsg.FetchRequestTopicPartition
	hw, lso, logStart int64 // the last answer's high watermark, last stable and log start offsets
	answered          bool
	moving            bool // Finish is moving it to the back
}

// NewFetchSessions returns an empty cache whose sessions metrics (nil:
// none) count.
func NewFetchSessions(cfg FetchSessionsConfig, metrics *Metrics) *FetchSessions {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &FetchSessions{cfg: cfg, now: time.Now, metrics: metrics, sessions: map[int32]*fetchSession{}, next: 1}
}

// counted updates the sessions gauge; called with mu held after a change.
func (fs *FetchSessions) counted() { fs.metrics.FetchSessions.Set(float64(len(fs.sessions))) }

// Stats returns the sessions held and how many were evicted so far.
func (fs *FetchSessions) Stats() (sessions int, evicted int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.sessions), fs.evicted
}

// FetchSessionUse is one fetch's part in its session: Finish filters and
// stamps the answer.
type FetchSessionUse struct {
	fs          *FetchSessions
	s           *fetchSession // nil: a fetch without a session
	incremental bool
}

// Begin resolves a fetch against the cache. It returns the fetch to answer
// as a full one (for an incremental fetch, every partition of its session
// at the offsets the client last gave), and the use whose Finish completes
// the answer; or, for a fetch the cache refuses (unknown session, wrong
// epoch, another principal's session, topic names and ids mixed), the
// answer to send. A fetch before v7 has no session.
func (fs *FetchSessions) Begin(r *kmsg.FetchRequest, principal string) (*kmsg.FetchRequest, *FetchSessionUse, *Reply) {
	use := &FetchSessionUse{fs: fs}
	if r.Version < 7 || fs == nil {
		return r, use, nil
	}
	usesIDs := r.Version >= 13
	fs.mu.Lock()
	defer fs.mu.Unlock()
	switch r.SessionEpoch {
	case fetchEpochFinal: // a sessionless full fetch; it closes the session it names
		if s := fs.sessions[r.SessionID]; s != nil && s.principal == principal {
			delete(fs.sessions, r.SessionID)
			fs.counted()
		}
		return r, use, nil
	case fetchEpochInitial: // a full fetch opening a session, closing the one it names
		if s := fs.sessions[r.SessionID]; s != nil && s.principal == principal {
			delete(fs.sessions, r.SessionID)
		}
		use.s = fs.open(r, principal, usesIDs)
		fs.counted()
		return r, use, nil
	}
	s := fs.sessions[r.SessionID]
	switch {
	case s == nil || s.principal != principal:
		return nil, nil, refuseFetch(r, codeFetchSessionNotFound)
	case s.usesIDs != usesIDs:
		return nil, nil, refuseFetch(r, codeFetchSessionTopicIDError)
	case r.SessionEpoch != s.epoch:
		return nil, nil, refuseFetch(r, codeInvalidFetchSessionEpoch)
	}
	s.epoch = nextFetchEpoch(s.epoch)
	s.used = fs.now()
	if len(r.ForgottenTopics) > 0 {
		for _, ft := range r.ForgottenTopics {
			for _, p := range ft.Partitions {
				delete(s.index, sessionKey{topic: keyTopic(ft.Topic, usesIDs), id: keyID(ft.TopicID, usesIDs), partition: p})
			}
		}
		s.parts = slices.DeleteFunc(s.parts, func(sp *sessionPart) bool { return s.index[sp.key] != sp })
	}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			s.update(sessionKey{topic: keyTopic(rt.Topic, usesIDs), id: keyID(rt.TopicID, usesIDs), partition: rp.Partition}, rp)
		}
	}
	use.s, use.incremental = s, true
	return s.request(r), use, nil
}

// open makes a session of a full fetch's partitions, evicting one if the
// cache is full; nil when there is no room.
func (fs *FetchSessions) open(r *kmsg.FetchRequest, principal string, usesIDs bool) *fetchSession {
	size := 0
	for _, rt := range r.Topics {
		size += len(rt.Partitions)
	}
	if fs.cfg.Slots <= 0 || len(fs.sessions) >= fs.cfg.Slots && !fs.evictFor(size) {
		return nil
	}
	s := &fetchSession{principal: principal, usesIDs: usesIDs, epoch: 1, used: fs.now(), index: map[sessionKey]*sessionPart{}}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			s.update(sessionKey{topic: keyTopic(rt.Topic, usesIDs), id: keyID(rt.TopicID, usesIDs), partition: rp.Partition}, rp)
		}
	}
	for fs.sessions[fs.next] != nil || fs.next <= 0 {
		fs.next++
		if fs.next <= 0 {
			fs.next = 1
		}
	}
	s.id = fs.next
	fs.next++
	fs.sessions[s.id] = s
	return s
}

// evictFor frees a slot for a new session of size partitions: the least
// recently used session if it has been idle for EvictAfter, else the
// smallest idle session if it is smaller than the newcomer.
func (fs *FetchSessions) evictFor(size int) bool {
	var lru, smallest *fetchSession
	for _, s := range fs.sessions {
		if lru == nil || s.used.Before(lru.used) {
			lru = s
		}
		if smallest == nil || len(s.parts) < len(smallest.parts) {
			smallest = s
		}
	}
	victim := smallest
	if lru != nil && fs.now().Sub(lru.used) >= fs.cfg.EvictAfter {
		victim = lru
	} else if smallest == nil || len(smallest.parts) >= size {
		return false
	}
	delete(fs.sessions, victim.id)
	fs.evicted++
	fs.metrics.FetchSessionEvictions.Inc()
	return true
}

// Finish completes the answer of a fetch: it names the session (0 for
// none), and for an incremental fetch keeps only the partitions with news,
// moving those with records to the end of the session's order so that a
// byte limit does not starve the others. It updates what the session last
// told the client. Records of dropped partitions are released.
func (u *FetchSessionUse) Finish(body *FetchBody) {
	if u == nil || u.s == nil {
		return
	}
	fs, s := u.fs, u.s
	fs.mu.Lock()
	defer fs.mu.Unlock()
	s.used = fs.now()
	body.SessionID = s.id
	var moved []*sessionPart
	kept := body.Topics[:0]
	for _, t := range body.Topics {
		parts := t.Partitions[:0]
		for _, p := range t.Partitions {
			sp := s.index[sessionKey{topic: keyTopic(t.Topic, s.usesIDs), id: keyID(t.TopicID, s.usesIDs), partition: p.Partition}]
			records := p.Records != nil && p.Records.Len() > 0
			news := sp == nil || !sp.answered || p.ErrorCode != 0 || records || p.PreferredReadReplica >= 0 ||
				p.HighWatermark != sp.hw || p.LastStableOffset != sp.lso || p.LogStartOffset != sp.logStart || p.Leader.LeaderID >= 0
			if sp != nil {
				sp.hw, sp.lso, sp.logStart, sp.answered = p.HighWatermark, p.LastStableOffset, p.LogStartOffset, p.ErrorCode == 0
				if records {
					moved = append(moved, sp)
				}
			}
			if news || !u.incremental {
				parts = append(parts, p)
			} else if p.Records != nil {
				p.Records.Release()
			}
		}
		if len(parts) > 0 || !u.incremental {
			t.Partitions = parts
			kept = append(kept, t)
		}
	}
	body.Topics = kept
	if len(moved) > 0 {
		for _, sp := range moved {
			sp.moving = true
		}
		stay := slices.DeleteFunc(s.parts, func(sp *sessionPart) bool { return sp.moving })
		for _, sp := range moved {
			sp.moving = false
		}
		s.parts = append(stay, moved...)
	}
}

// update adds a partition to the session or takes the client's new fetch
// fields for it.
func (s *fetchSession) update(k sessionKey, rp kmsg.FetchRequestTopicPartition) {
	if sp := s.index[k]; sp != nil {
		sp.req = rp
		return
	}
	sp := &sessionPart{key: k, req: rp}
	s.index[k] = sp
	s.parts = append(s.parts, sp)
}

// request is r with every partition of the session, in the session's
// order, grouped by topic as they come.
func (s *fetchSession) request(r *kmsg.FetchRequest) *kmsg.FetchRequest {
	full := *r
	full.Topics, full.ForgottenTopics = nil, nil
	for _, sp := range s.parts {
		if n := len(full.Topics); n == 0 || full.Topics[n-1].Topic != sp.key.topic || full.Topics[n-1].TopicID != sp.key.id {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = sp.key.topic, sp.key.id
			full.Topics = append(full.Topics, t)
		}
		t := &full.Topics[len(full.Topics)-1]
		t.Partitions = append(t.Partitions, sp.req)
	}
	return &full
}

// nextFetchEpoch follows Kafka's: after the largest int32 comes 1.
func nextFetchEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

func keyTopic(name string, usesIDs bool) string {
	if usesIDs {
		return ""
	}
	return name
}

func keyID(id [16]byte, usesIDs bool) [16]byte {
	if usesIDs {
		return id
	}
	return [16]byte{}
}

// refuseFetch is a fetch answered with only a top-level error.
func refuseFetch(r *kmsg.FetchRequest, code int16) *Reply {
	body := &FetchBody{Version: r.Version, ErrorCode: code}
	body.Encode()
	return &Reply{Body: body}
}
