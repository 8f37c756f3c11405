package storageclient

import (
	"context"
	"crypto/tls"
	"sync"
)

// Pool keeps one connection per storage node address and redials a broken one
// on next use. It is safe for concurrent use.
type Pool struct {
	clientID string
	tls      *tls.Config // nil: plain TCP

	mu     sync.Mutex       // guards conns and closed
	conns  map[string]*Conn // by address
	closed bool
}

// NewPool returns an empty pool whose connections present clientID.
func NewPool(clientID string) *Pool { return NewPoolTLS(clientID, nil) }

// NewPoolTLS returns an empty pool whose connections present clientID and
// use TLS with cfg (plain TCP when cfg is nil).
func NewPoolTLS(clientID string, cfg *tls.Config) *Pool {
	return &Pool{clientID: clientID, tls: cfg, conns: map[string]*Conn{}}
}

// Get returns a working connection to addr, dialing when needed.
func (p *Pool) Get(ctx context.Context, addr string) (*Conn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	c := p.conns[addr]
	p.mu.Unlock()
	if c != nil && c.Err() == nil {
		return c, nil
	}
	nc, err := DialTLS(ctx, addr, p.clientID, p.tls)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = nc.Close()
		return nil, ErrClosed
	}
	if cur := p.conns[addr]; cur != nil && cur != c && cur.Err() == nil {
		_ = nc.Close() // another caller redialed first
		return cur, nil
	}
	if c != nil {
		_ = c.Close()
	}
	p.conns[addr] = nc
	return nc, nil
}

// Close closes every connection.
func (p *Pool) Close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[string]*Conn{}
	p.closed = true
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return nil
}
