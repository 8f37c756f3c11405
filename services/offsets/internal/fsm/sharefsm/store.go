package sharefsm

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
)

// The share groups' part of the state file: bucket holds one sub-bucket
// per group, its configuration under keyConfig and each partition's state
// (storedPartition) under partkey.Bytes(topic, partition).
var (
	bucket    = []byte("shares")
	keyConfig = []byte("config") // never a partition key: those have a NUL 5 bytes from the end
)

// putConfig writes g's configuration, creating its sub-bucket.
func putConfig(tx *bolt.Tx, g *Group) error {
	b, err := tx.Bucket(bucket).CreateBucketIfNotExists([]byte(g.Name))
	if err != nil {
		return err
	}
	v, err := json.Marshal(g.Config)
	if err != nil {
		return err
	}
	return b.Put(keyConfig, v)
}

// Flush writes the partitions the batch's commands changed, once each
// however many commands changed them: those still their group's (a later
// command may have deleted the group or replaced the partition, which it
// then wrote or removed itself). The FSM calls it after the batch's last
// entry, in the batch's transaction.
func (s *Stage) Flush(tx *bolt.Tx) error {
	for p, group := range s.dirty {
		g := s.groups[group]
		if g == nil || g.Partitions[partkey.String(p.TP())] != p {
			continue
		}
		b, err := tx.Bucket(bucket).CreateBucketIfNotExists([]byte(group))
		if err != nil {
			return err
		}
		v, err := EncodePartition(p)
		if err != nil {
			return err
		}
		if err := b.Put(partkey.Bytes(p.Topic, p.Partition), v); err != nil {
			return err
		}
	}
	return nil
}

// storedPartition is a share-partition as stored: its records run-length
// encoded (consecutive records alike make one run).
type storedPartition struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Start       int64        `json:"start"`
	Runs        []storedRun  `json:"runs,omitempty"`
	Accepted    int64        `json:"accepted,omitempty"`
	Archived    int64        `json:"archived,omitempty"`
	Deliveries  int64        `json:"deliveries,omitempty"`
	DeadLetters *DeadLetters `json:"dead_letters,omitempty"`
}

type storedRun struct {
	N         int         `json:"n"`
	State     RecordState `json:"s"`
	Count     int16       `json:"c,omitempty"`
	Lock      int64       `json:"l,omitempty"`
	Member    string      `json:"m,omitempty"`
	Reason    string      `json:"r,omitempty"`
	NotBefore int64       `json:"nb,omitempty"`
}

// EncodePartition returns p's state as stored: its value in its group's
// bucket.
func EncodePartition(p *Partition) ([]byte, error) {
	s := storedPartition{Topic: p.Topic, Partition: p.Partition, Start: p.Start, Accepted: p.Accepted, Archived: p.Archived, Deliveries: p.Deliveries,
		DeadLetters: p.DeadLetters}
	for i, r := range p.Records {
		member, reason := p.MemberOf(r), ""
		if r.State == Archiving {
			reason = p.ReasonOf(p.Start + int64(i))
		}
		if n := len(s.Runs); n > 0 {
			last := &s.Runs[n-1]
			if last.State == r.State && last.Count == r.Count && last.Lock == r.LockUntilMs && last.Member == member && last.Reason == reason &&
				last.NotBefore == r.NotBeforeMs {
				last.N++
				continue
			}
		}
		s.Runs = append(s.Runs, storedRun{N: 1, State: r.State, Count: r.Count, Lock: r.LockUntilMs, Member: member, Reason: reason, NotBefore: r.NotBeforeMs})
	}
	return json.Marshal(s)
}

// decodePartition reads a partition's state as stored.
func decodePartition(v []byte) (*Partition, error) {
	var s storedPartition
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, err
	}
	p := &Partition{Topic: s.Topic, Partition: s.Partition, Start: s.Start, Accepted: s.Accepted, Archived: s.Archived, Deliveries: s.Deliveries,
		DeadLetters: s.DeadLetters}
	for _, r := range s.Runs {
		if r.N <= 0 || r.N > 1_000_000 || len(p.Records)+r.N > 1_000_000 || r.State > Archiving {
			return nil, fmt.Errorf("run of %d records in state %d is not valid", r.N, r.State)
		}
		var ref int32
		if r.Member != "" {
			ref = p.memberRef(r.Member)
		}
		for range r.N {
			if r.Reason != "" {
				p.setReason(p.End(), r.Reason)
			}
			p.Records = append(p.Records, Record{State: r.State, Count: r.Count, LockUntilMs: r.Lock, member: ref, NotBeforeMs: r.NotBefore})
		}
	}
	return p, nil
}

// Load reads every share group of the state file, in a transaction that
// may write: a new file gets its bucket.
func Load(tx *bolt.Tx) (map[string]*Group, error) {
	if _, err := tx.CreateBucketIfNotExists(bucket); err != nil {
		return nil, err
	}
	out := map[string]*Group{}
	err := tx.Bucket(bucket).ForEachBucket(func(name []byte) error {
		b := tx.Bucket(bucket).Bucket(name)
		g := &Group{Name: string(name), Config: shares.DefaultConfig(), Partitions: map[string]*Partition{}}
		err := b.ForEach(func(k, v []byte) error {
			if string(k) == string(keyConfig) {
				if err := json.Unmarshal(v, &g.Config); err != nil {
					return fmt.Errorf("share group %s: corrupt configuration: %w", name, err)
				}
				return nil
			}
			p, err := decodePartition(v)
			if err != nil {
				return fmt.Errorf("share group %s: corrupt partition state %q: %w", name, k, err)
			}
			g.Partitions[partkey.String(groups.TP{Topic: p.Topic, Partition: p.Partition})] = p
			return nil
		})
		out[g.Name] = g
		return err
	})
	return out, err
}
