// Package objstore is the object-store client of tiered storage: Store, its
// contract, an S3 implementation (Open) for any S3-compatible server and an
// in-memory one (Mem) for the tests of the packages that use a Store.
//
// Keys given to a Store are relative: the S3 implementation puts its
// Config.Prefix in front of them and takes it off again in List, so that
// several clusters can share one bucket. Objects are written whole and
// never appended to: a key names the same bytes from its Put until its
// Delete or the next Put of the key.
package objstore

import (
	"context"
	"errors"
	"io"
	"time"
)

// Store is an object store: S3 or a fake. Its methods may be called from
// any goroutine at once; every call blocks until the store answers, ctx is
// done or, for S3, the configured timeout and retries run out.
type Store interface {
	// Put writes the size bytes of body as the whole object key, replacing
	// any object of that name. The object is durable, and visible to
	// GetRange and List, when Put returns nil. body is read from its
	// current position, and may be read again from there on a retry.
	Put(ctx context.Context, key string, body io.ReadSeeker, size int64) error
	// GetRange returns the n bytes of object key at off, or with n < 0
	// those from off to the object's end. An object shorter than off+n (or
	// than off) gives an error wrapping io.ErrUnexpectedEOF, a missing one
	// an error wrapping ErrNotFound.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Delete removes the objects; a key with no object is not an error.
	Delete(ctx context.Context, keys ...string) error
	// List returns every object whose key starts with prefix, sorted by
	// key.
	List(ctx context.Context, prefix string) ([]Object, error)
}

// Object describes a stored object.
type Object struct {
	// Key is the object's key as given to Put (without Config.Prefix).
	Key string
	// Size is the object's length in bytes.
	Size int64
	// Modified is when the object was last written, as the store says.
	Modified time.Time
}

// ErrRefused is wrapped by the errors of a store that answered and
// refused the configuration: credentials it does not accept, a bucket
// that does not exist. Other errors of Open (a store that did not answer)
// may pass by themselves.
var ErrRefused = errors.New("refused by the object store")

// ErrNotFound is wrapped by the error of GetRange for a key with no
// object.
var ErrNotFound = errors.New("object not found")
