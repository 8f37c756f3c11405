package fsm

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/sluicemq/sluice/libs/cluster"
)

// maxPrincipalName bounds a principal's name.
const maxPrincipalName = 255

func (s *state) setPrincipal(c *SetPrincipal) (bool, error) {
	p := c.Principal
	if p.Name == "" || len(p.Name) > maxPrincipalName {
		return false, fmt.Errorf("%w: principal name of %d bytes (1..%d)", ErrInvalidPrincipal, len(p.Name), maxPrincipalName)
	}
	old, had := s.principals[p.Name]
	if c.Delete {
		if !had {
			return false, fmt.Errorf("%w: %q", ErrUnknownPrincipal, p.Name)
		}
		delete(s.principals, p.Name)
		for a := range s.acls {
			if a.Principal == p.Name {
				delete(s.acls, a)
			}
		}
		return true, nil
	}
	if b, err := hex.DecodeString(p.TokenSHA256); err != nil || len(b) != 32 {
		return false, fmt.Errorf("%w: the token hash of %q is not 64 hex digits", ErrInvalidPrincipal, p.Name)
	}
	for name, q := range s.principals {
		if q.TokenSHA256 == p.TokenSHA256 && name != p.Name {
			return false, fmt.Errorf("%w: %q has the same token as %q", ErrInvalidPrincipal, p.Name, name)
		}
	}
	for _, c := range p.SCRAM {
		if _, known := cluster.ScramHash(c.Mechanism); !known || len(c.Salt) == 0 || c.Iterations < cluster.MinScramIterations ||
			len(c.StoredKey) == 0 || len(c.ServerKey) == 0 {
			return false, fmt.Errorf("%w: the %s credential of %q is not valid (mechanism, salt, at least %d iterations, keys)",
				ErrInvalidPrincipal, c.Mechanism, p.Name, cluster.MinScramIterations)
		}
	}
	s.principals[p.Name] = p
	return !had || !samePrincipal(old, p), nil
}

func (s *state) setACL(c *SetACL) (bool, error) {
	a := c.ACL.Normalized()
	if _, ok := s.principals[a.Principal]; !ok && !c.Delete {
		return false, fmt.Errorf("%w: %q", ErrUnknownPrincipal, a.Principal)
	}
	if err := cluster.ValidateACL(a); err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalidPrincipal, err)
	}
	had := s.acls[a]
	if c.Delete {
		delete(s.acls, a)
		return had, nil
	}
	s.acls[a] = true
	return !had, nil
}

func (s *state) sortedPrincipals() []cluster.Principal { return valuesByKey(s.principals) }

func (s *state) sortedACLs() []cluster.ACL {
	if len(s.acls) == 0 {
		return nil
	}
	out := make([]cluster.ACL, 0, len(s.acls))
	for a := range s.acls {
		out = append(out, a)
	}
	// A total order: every replica writes the same model.
	slices.SortFunc(out, func(x, y cluster.ACL) int {
		return cmp.Or(cmp.Compare(x.Principal, y.Principal), cmp.Compare(x.Resource, y.Resource), cmp.Compare(x.Topic, y.Topic),
			cmp.Compare(x.Operation, y.Operation), cmp.Compare(x.Pattern, y.Pattern), cmp.Compare(x.Host, y.Host), compareBool(x.Deny, y.Deny))
	})
	return out
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// samePrincipal reports whether two principals are equal, credentials
// included.
func samePrincipal(a, b cluster.Principal) bool {
	return a.Name == b.Name && a.TokenSHA256 == b.TokenSHA256 && a.Admin == b.Admin &&
		slices.EqualFunc(a.SCRAM, b.SCRAM, func(x, y cluster.ScramCredential) bool {
			return x.Mechanism == y.Mechanism && x.Iterations == y.Iterations && bytes.Equal(x.Salt, y.Salt) &&
				bytes.Equal(x.StoredKey, y.StoredKey) && bytes.Equal(x.ServerKey, y.ServerKey)
		})
}
