package cluster

// Principal is a user of the cluster: a name and the SHA-256 of its bearer
// token (hex; the token itself is never stored). Admin principals may do
// everything, the admin routes and the console included.
type Principal struct {
	Name        string `json:"name"`
	TokenSHA256 string `json:"token_sha256,omitempty"`
	Admin       bool   `json:"admin,omitempty"`
	// SCRAM holds the principal's SCRAM credentials for Kafka clients
	// (SASL/SCRAM-SHA-256 and -512, RFC 5802), derived from its token: salt,
	// iterations and the stored and server keys, never the token itself.
	SCRAM []ScramCredential `json:"scram,omitempty"`
	// Host is the address a request of the principal comes from, set on
	// the copy a listener checks (At), never stored: ACLs naming a host
	// apply to requests from it alone.
	Host string `json:"-"`
}

// At returns a copy of p checked for a request from host (an IP address;
// "" when unknown, and then no ACL naming a host applies).
func (p *Principal) At(host string) *Principal {
	if p == nil {
		return nil
	}
	c := *p
	c.Host = host
	return &c
}

// ScramCredential is what a server keeps to check a SCRAM client (RFC 5802
// section 3): StoredKey = H(ClientKey), ServerKey, the salt and iteration
// count of the salted password.
type ScramCredential struct {
	// Mechanism is SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism  string `json:"mechanism"`
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// Scram returns the principal's credential for a SCRAM mechanism.
func (p *Principal) Scram(mechanism string) (ScramCredential, bool) {
	for _, c := range p.SCRAM {
		if c.Mechanism == mechanism {
			return c, true
		}
	}
	return ScramCredential{}, false
}

// Principal returns the principal with the given name.
func (s *Snapshot) Principal(name string) (*Principal, bool) {
	for i := range s.Principals {
		if s.Principals[i].Name == name {
			return &s.Principals[i], true
		}
	}
	return nil, false
}

// PrincipalByToken returns the principal whose token hashes to sha (hex).
func (s *Snapshot) PrincipalByToken(sha string) (*Principal, bool) {
	for i := range s.Principals {
		if s.Principals[i].TokenSHA256 == sha {
			return &s.Principals[i], true
		}
	}
	return nil, false
}
