package raftstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Sentinel errors of the store.
var (
	// ErrKeyNotFound is returned by the StableStore for a missing key. Its
	// text must stay exactly "not found": raft compares the text.
	ErrKeyNotFound = errors.New("not found")
	// ErrCorruptEntry is wrapped by every error about a stored entry that
	// cannot be decoded.
	ErrCorruptEntry = errors.New("raftstore: corrupt log entry")
	// ErrClosed is returned by calls on a closed store.
	ErrClosed = errors.New("raftstore: store is closed")
)

var (
	bucketLogs   = []byte("logs")
	bucketStable = []byte("stable")
)

// Config configures a Store.
type Config struct {
	// Path is the bbolt file; it is created when missing.
	Path string
	// OpenTimeout bounds the wait for the file lock held by another process.
	OpenTimeout time.Duration
	// NoSync skips fsync on commit. Only for tests: it gives up durability.
	NoSync bool
}

// DefaultConfig returns a Config for the file at path.
func DefaultConfig(path string) Config {
	return Config{Path: path, OpenTimeout: 5 * time.Second}
}

// Validate checks the fields.
func (c Config) Validate() error {
	if c.Path == "" {
		return errors.New("raftstore: Path is empty")
	}
	if c.OpenTimeout <= 0 {
		return errors.New("raftstore: OpenTimeout must be positive")
	}
	return nil
}

// Store is a raft.LogStore and raft.StableStore on one bbolt file. Its
// methods are safe for concurrent use (bbolt serialises writers).
type Store struct {
	db *bolt.DB
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// Open opens (or creates) the store described by cfg.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	db, err := bolt.Open(cfg.Path, 0o600, &bolt.Options{Timeout: cfg.OpenTimeout, NoSync: cfg.NoSync})
	if err != nil {
		return nil, fmt.Errorf("raftstore: open %s: %w", cfg.Path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketLogs, bucketStable} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("raftstore: create buckets in %s: %w", cfg.Path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file. Calls after Close fail.
func (s *Store) Close() error { return s.db.Close() }

// Path returns the file's path.
func (s *Store) Path() string { return s.db.Path() }

// FirstIndex returns the lowest stored log index, or 0 when the log is empty.
func (s *Store) FirstIndex() (uint64, error) {
	return s.edgeIndex(func(c *bolt.Cursor) ([]byte, []byte) { return c.First() })
}

// LastIndex returns the highest stored log index, or 0 when the log is empty.
func (s *Store) LastIndex() (uint64, error) {
	return s.edgeIndex(func(c *bolt.Cursor) ([]byte, []byte) { return c.Last() })
}

func (s *Store) edgeIndex(move func(*bolt.Cursor) ([]byte, []byte)) (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		k, _ := move(tx.Bucket(bucketLogs).Cursor())
		if k == nil {
			return nil
		}
		if len(k) != 8 {
			return fmt.Errorf("%w: log key of %d bytes", ErrCorruptEntry, len(k))
		}
		idx = keyUint64(k)
		return nil
	})
	return idx, s.wrap(err)
}

// GetLog reads the entry at index into l; raft.ErrLogNotFound when missing.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLogs).Get(uint64Key(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		if err := decodeLog(v, l); err != nil {
			return fmt.Errorf("log index %d: %w", index, err)
		}
		return nil
	})
	return s.wrap(err)
}

// StoreLog stores one entry durably.
func (s *Store) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores the entries in one transaction: all of them or none.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		for _, l := range logs {
			if err := b.Put(uint64Key(l.Index), encodeLog(l)); err != nil {
				return fmt.Errorf("store log index %d: %w", l.Index, err)
			}
		}
		return nil
	})
	return s.wrap(err)
}

// DeleteRange deletes the entries with min <= index <= max.
func (s *Store) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		// Collect first, then delete: deleting under a moving cursor is easy
		// to get wrong, and the keys are 8 bytes each.
		var keys [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(uint64Key(min)); len(k) == 8 && keyUint64(k) <= max; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return fmt.Errorf("delete log index %d: %w", keyUint64(k), err)
			}
		}
		return nil
	})
	return s.wrap(err)
}

// Set stores a stable key durably.
func (s *Store) Set(key, val []byte) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStable).Put(key, val)
	})
	return s.wrap(err)
}

// Get returns a copy of a stable key's value; ErrKeyNotFound ("not found")
// when it is missing.
func (s *Store) Get(key []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketStable).Get(key)
		if v == nil {
			return ErrKeyNotFound
		}
		out = append(make([]byte, 0, len(v)), v...)
		return nil
	})
	if err != nil {
		return nil, s.wrap(err)
	}
	return out, nil
}

// SetUint64 stores a uint64 under key.
func (s *Store) SetUint64(key []byte, val uint64) error { return s.Set(key, uint64Key(val)) }

// GetUint64 reads a uint64 stored by SetUint64; ErrKeyNotFound when missing.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable key %q holds %d bytes, not a uint64", ErrCorruptEntry, key, len(v))
	}
	return keyUint64(v), nil
}

// wrap leaves the errors raft tests by identity or text untouched and maps
// bbolt's closed-database error to ErrClosed.
func (s *Store) wrap(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}
