package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DumpFile writes every key and value of the state file at path (opened
// read-only: the replica must be stopped), one line each, buckets and keys
// in order: two files hold the same state when their dumps are equal. The
// applied index is written in decimal.
func DumpFile(path string, w io.Writer) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("offsets state %s: %w", path, err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return dumpBucket(w, strconv.Quote(string(name)), b) })
	})
}

func dumpBucket(w io.Writer, path string, b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			return dumpBucket(w, path+"/"+strconv.Quote(string(k)), b.Bucket(k))
		}
		if bytes.Equal(k, keyApplied) && len(v) == 8 {
			v = []byte(strconv.FormatUint(binary.BigEndian.Uint64(v), 10))
		}
		_, err := fmt.Fprintf(w, "%s %q %s\n", path, k, v)
		return err
	})
}

// AppliedIndexOf returns the applied index stored in the state file at
// path (opened read-only: the replica must be stopped).
func AppliedIndexOf(path string) (uint64, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("offsets state %s: %w", path, err)
	}
	defer db.Close()
	var applied uint64
	err = db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil {
			return fmt.Errorf("offsets state %s: no %s bucket", path, bucketMeta)
		}
		applied = readApplied(tx)
		return nil
	})
	return applied, err
}
