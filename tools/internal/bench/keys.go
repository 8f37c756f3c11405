package bench

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
)

// Key kinds of --keys.
const (
	KeysNone   = "none"
	KeysRandom = "random"
	KeysFixed  = "fixed"
)

// randomKeyLen is the length of a --keys random key.
const randomKeyLen = 16

// fixedKeyPrefix starts every --keys fixed:N key ("key-0" ... "key-<N-1>").
const fixedKeyPrefix = "key-"

// keyAlphabet is what random keys (and values) are made of: printable, so
// they travel as JSON strings unchanged.
const keyAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// KeySpec is a parsed --keys.
type KeySpec struct {
	Kind string // KeysNone, KeysRandom or KeysFixed
	N    int    // distinct keys of KeysFixed
}

// ParseKeySpec reads none, random or fixed:N (N >= 1).
func ParseKeySpec(s string) (KeySpec, error) {
	switch {
	case s == KeysNone:
		return KeySpec{Kind: KeysNone}, nil
	case s == KeysRandom:
		return KeySpec{Kind: KeysRandom}, nil
	case strings.HasPrefix(s, KeysFixed+":"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, KeysFixed+":"))
		if err != nil || n < 1 {
			return KeySpec{}, fmt.Errorf("%q: fixed:N needs a whole number N >= 1", s)
		}
		return KeySpec{Kind: KeysFixed, N: n}, nil
	}
	return KeySpec{}, fmt.Errorf("%q is not none, random or fixed:N", s)
}

// String is the spec as --keys takes it.
func (k KeySpec) String() string {
	if k.Kind == KeysFixed {
		return KeysFixed + ":" + strconv.Itoa(k.N)
	}
	return k.Kind
}

// MaxLen is the longest key the spec generates.
func (k KeySpec) MaxLen() int {
	switch k.Kind {
	case KeysRandom:
		return randomKeyLen
	case KeysFixed:
		return len(fixedKeyPrefix) + len(strconv.Itoa(k.N-1))
	}
	return 0
}

// KeyGen generates the keys of one producer; it is not safe for concurrent
// use.
type KeyGen interface {
	// Next returns the next key, nil for none. The bytes are valid until the
	// next call (the SDK's Send copies them).
	Next() []byte
}

// NewGen returns a generator of the spec. seed seeds random keys; fixed keys
// start at key start%N, so producers given different starts spread over the
// keys.
func (k KeySpec) NewGen(seed uint64, start int) KeyGen {
	switch k.Kind {
	case KeysRandom:
		return &randomKeys{rng: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), buf: make([]byte, randomKeyLen)}
	case KeysFixed:
		return &fixedKeys{n: k.N, next: start % k.N, buf: make([]byte, 0, k.MaxLen())}
	}
	return noKeys{}
}

// noKeys gives keyless records (the SDK's sticky partitioner places them).
type noKeys struct{}

func (noKeys) Next() []byte { return nil }

// randomKeys gives a fresh random key of randomKeyLen alphanumeric bytes
// per record.
type randomKeys struct {
	rng *mrand.Rand
	buf []byte
}

func (g *randomKeys) Next() []byte {
	fillRandom(g.rng, g.buf)
	return g.buf
}

// fixedKeys cycles through n keys.
type fixedKeys struct {
	n, next int
	buf     []byte
}

func (g *fixedKeys) Next() []byte {
	g.buf = strconv.AppendInt(append(g.buf[:0], fixedKeyPrefix...), int64(g.next), 10)
	if g.next++; g.next == g.n {
		g.next = 0
	}
	return g.buf
}

// fillRandom fills b with random characters of keyAlphabet.
func fillRandom(rng *mrand.Rand, b []byte) {
	for i := range b {
		b[i] = keyAlphabet[rng.IntN(len(keyAlphabet))]
	}
}

// randomHex returns n random bytes in hex (group ids).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // documented never to fail
	return hex.EncodeToString(b)
}
