// Package store keeps committed consumer offsets in a bbolt file: one bucket
// per group, one key per (topic, partition). A commit returns only after bbolt
// has synced the transaction to disk, so a committed offset survives a crash.
//
// Invariants: offsets are stored exactly as committed (the store does not
// enforce monotonicity: resetting a group's offsets moves them backwards on
// purpose); a commit of several partitions is one transaction, all or nothing.
// Group membership, generations and replication arrive with the consumer-groups
// work; this package is their storage.
package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Committed is one committed offset.
type Committed struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Metadata  string `json:"metadata,omitempty"`
	// CommitTime is the commit's wall-clock time in Unix milliseconds.
	CommitTime int64 `json:"commit_time"`
}

// Sentinel errors.
var (
	// ErrInvalid is returned for a commit that names no group or topic, or a
	// negative partition or offset.
	ErrInvalid = errors.New("store: invalid commit")
)

// Store is the offsets store. It is safe for concurrent use.
type Store struct {
	db *bolt.DB
}

// Open opens (creating) the bbolt file at path.
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open offsets store %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// key is topic NUL partition(4 bytes big endian); NUL cannot occur in a topic name.
func key(topic string, partition int32) []byte {
	k := make([]byte, len(topic)+5)
	copy(k, topic)
	binary.BigEndian.PutUint32(k[len(topic)+1:], uint32(partition))
	return k
}

func parseKey(k []byte) (string, int32, bool) {
	if len(k) < 6 || k[len(k)-5] != 0 {
		return "", 0, false
	}
	return string(k[:len(k)-5]), int32(binary.BigEndian.Uint32(k[len(k)-4:])), true
}

// Commit stores the offsets of one group in one durable transaction.
func (s *Store) Commit(group string, offsets []Committed) error {
	if group == "" {
		return fmt.Errorf("%w: empty group id", ErrInvalid)
	}
	for _, c := range offsets {
		if c.Topic == "" || c.Partition < 0 || c.Offset < 0 {
			return fmt.Errorf("%w: topic %q partition %d offset %d", ErrInvalid, c.Topic, c.Partition, c.Offset)
		}
	}
	now := time.Now().UnixMilli()
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(group))
		if err != nil {
			return err
		}
		for _, c := range offsets {
			if c.CommitTime == 0 {
				c.CommitTime = now
			}
			v, err := json.Marshal(c)
			if err != nil {
				return err
			}
			if err := b.Put(key(c.Topic, c.Partition), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// Fetch returns a group's committed offsets, for one topic or (topic == "") all,
// ordered by topic and partition.
func (s *Store) Fetch(group, topic string) ([]Committed, error) {
	var out []Committed
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(group))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			t, _, ok := parseKey(k)
			if !ok || (topic != "" && t != topic) {
				return nil
			}
			var c Committed
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("group %s: corrupt offset record: %w", group, err)
			}
			out = append(out, c)
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, err
}

// Groups lists the groups with committed offsets.
func (s *Store) Groups() ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			out = append(out, string(name))
			return nil
		})
	})
	return out, err
}

// DeleteGroup removes a group's offsets; deleting a missing group is not an error.
func (s *Store) DeleteGroup(group string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		err := tx.DeleteBucket([]byte(group))
		if errors.Is(err, bolt.ErrBucketNotFound) {
			return nil
		}
		return err
	})
}
