package service

import (
	"context"
	"net"
	"sync"
)

// Conns are a TCP listener's open connections, as the storage protocol and
// the Kafka listeners keep them: counted by client address for a limit per
// address, and all closed when the listener stops. Safe for concurrent use.
type Conns[C comparable] struct {
	max int // per client address; 0: no limit

	mu    sync.Mutex
	open  map[C]string // connection -> client address
	perIP map[string]int
}

// NewConns returns an empty set allowing maxPerIP connections from one
// client address (0: no limit).
func NewConns[C comparable](maxPerIP int) *Conns[C] {
	return &Conns[C]{max: maxPerIP, open: map[C]string{}, perIP: map[string]int{}}
}

// Add counts c as open from ip; false, and c not added, when ip already has
// the maximum open.
func (s *Conns[C]) Add(c C, ip string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && s.perIP[ip] >= s.max {
		return false
	}
	s.open[c] = ip
	s.perIP[ip]++
	return true
}

// Remove forgets a connection Add counted.
func (s *Conns[C]) Remove(c C) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ip, ok := s.open[c]
	if !ok {
		return
	}
	delete(s.open, c)
	if s.perIP[ip]--; s.perIP[ip] == 0 {
		delete(s.perIP, ip)
	}
}

// Each calls f for every open connection (to close them all at stop); f
// must not call Add or Remove.
func (s *Conns[C]) Each(f func(C)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.open {
		f(c)
	}
}

// RemoteIP is the address a connection comes from, without its port.
func RemoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.RemoteAddr().String()
}

// WaitContext waits for wg, or until ctx ends (its error).
func WaitContext(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
