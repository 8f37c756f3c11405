package objstore

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Operations as Mem passes them to its fault function.
const (
	OpPut    = "put"
	OpGet    = "get"
	OpDelete = "delete"
	OpList   = "list"
)

// Mem is an in-memory Store for tests, with the semantics of the S3 one
// and fault injection. Its zero value is not usable: call NewMem.
type Mem struct {
	mu      sync.Mutex
	objects map[string]memObject       // guarded by mu
	fault   func(op, key string) error // guarded by mu
}

type memObject struct {
	data     []byte
	modified time.Time
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty Mem.
func NewMem() *Mem { return &Mem{objects: map[string]memObject{}} }

// SetFault makes every later call ask f first, with the operation (OpPut,
// OpGet, OpDelete, OpList) and the key (the prefix for List; Delete asks
// once per key): a non-nil error fails the call, which then changes
// nothing. f runs without Mem's lock, so it may block (a slow store) or
// call Mem. nil removes the fault.
func (m *Mem) SetFault(f func(op, key string) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fault = f
}

// check returns the error of ctx or of the fault function for (op, key).
func (m *Mem) check(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: %s %q: %w", op, key, err)
	}
	m.mu.Lock()
	f := m.fault
	m.mu.Unlock()
	if f == nil {
		return nil
	}
	if err := f(op, key); err != nil {
		return fmt.Errorf("objstore: %s %q: %w", op, key, err)
	}
	return nil
}

// Put implements Store: it reads exactly size bytes of body.
func (m *Mem) Put(ctx context.Context, key string, body io.ReadSeeker, size int64) error {
	if err := m.check(ctx, OpPut, key); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("objstore: put %q: negative size %d", key, size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(body, b); err != nil {
		return fmt.Errorf("objstore: put %q: body shorter than %d bytes: %w", key, size, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = memObject{data: b, modified: time.Now()}
	return nil
}

// GetRange implements Store.
func (m *Mem) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := m.check(ctx, OpGet, key); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[key]
	switch size := int64(len(o.data)); {
	case off < 0:
		return nil, fmt.Errorf("objstore: get %q: negative offset", key)
	case !ok:
		return nil, fmt.Errorf("objstore: get %q: %w", key, ErrNotFound)
	case off > size || (n >= 0 && off+n > size):
		return nil, fmt.Errorf("objstore: get %q [%d, +%d): object has %d bytes: %w", key, off, n, size, io.ErrUnexpectedEOF)
	case n < 0:
		n = size - off
	}
	return slices.Clone(o.data[off : off+n : off+n]), nil
}

// Delete implements Store. A fault on one key leaves the keys before it
// deleted, as a failed S3 batch may.
func (m *Mem) Delete(ctx context.Context, keys ...string) error {
	for _, k := range keys {
		if err := m.check(ctx, OpDelete, k); err != nil {
			return err
		}
		m.mu.Lock()
		delete(m.objects, k)
		m.mu.Unlock()
	}
	return nil
}

// List implements Store.
func (m *Mem) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := m.check(ctx, OpList, prefix); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var objs []Object
	for _, k := range slices.Sorted(maps.Keys(m.objects)) {
		if strings.HasPrefix(k, prefix) {
			o := m.objects[k]
			objs = append(objs, Object{Key: k, Size: int64(len(o.data)), Modified: o.modified})
		}
	}
	return objs, nil
}

// Objects returns a copy of every object's bytes by key.
func (m *Mem) Objects() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := make(map[string][]byte, len(m.objects))
	for k, o := range m.objects {
		c[k] = slices.Clone(o.data)
	}
	return c
}

// Corrupt flips the bits of the byte at pos of object key, as a bad disk
// or transfer would; it panics when there is no such byte (a test's
// mistake).
func (m *Mem) Corrupt(key string, pos int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[key]
	if !ok || pos < 0 || pos >= int64(len(o.data)) {
		panic(fmt.Sprintf("objstore: Corrupt(%q, %d): no such byte", key, pos))
	}
	// A new slice: copies handed out by GetRange and Objects keep theirs.
	data := slices.Clone(o.data)
	data[pos] ^= 0xff
	m.objects[key] = memObject{data: data, modified: o.modified}
}
