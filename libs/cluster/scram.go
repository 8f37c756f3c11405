package cluster

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
)

// SCRAM mechanisms, by their SASL names.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Iteration counts of SCRAM credentials: Kafka's minimum, and the count
// sluicectl uses (Kafka's tools use 4096 too).
const (
	MinScramIterations     = 4096
	DefaultScramIterations = 4096
)

// ScramHash returns the hash of a SCRAM mechanism.
func ScramHash(mechanism string) (func() hash.Hash, bool) {
	switch mechanism {
	case ScramSHA256:
		return sha256.New, true
	case ScramSHA512:
		return sha512.New, true
	}
	return nil, false
}

// NewScramCredential derives the credential a server keeps for password
// (RFC 5802 section 3) with a new random salt.
func NewScramCredential(mechanism, password string, iterations int) (ScramCredential, error) {
	h, ok := ScramHash(mechanism)
	if !ok {
		return ScramCredential{}, fmt.Errorf("unknown SCRAM mechanism %q", mechanism)
	}
	if iterations < MinScramIterations {
		return ScramCredential{}, fmt.Errorf("SCRAM iterations %d are below %d", iterations, MinScramIterations)
	}
	salt := make([]byte, 24)
	if _, err := rand.Read(salt); err != nil {
		return ScramCredential{}, err
	}
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return ScramCredential{}, err
	}
	return ScramCredentialFromSalted(mechanism, salt, iterations, salted)
}

// ScramCredentialFromSalted is the credential of a salted password a client
// derived itself (Kafka's AlterUserScramCredentials): the salted password
// must be the mechanism's hash size, the salt not empty, the iterations at
// least MinScramIterations.
func ScramCredentialFromSalted(mechanism string, salt []byte, iterations int, salted []byte) (ScramCredential, error) {
	h, ok := ScramHash(mechanism)
	switch {
	case !ok:
		return ScramCredential{}, fmt.Errorf("unknown SCRAM mechanism %q", mechanism)
	case iterations < MinScramIterations:
		return ScramCredential{}, fmt.Errorf("SCRAM iterations %d are below %d", iterations, MinScramIterations)
	case len(salt) == 0:
		return ScramCredential{}, fmt.Errorf("an empty salt")
	case len(salted) != h().Size():
		return ScramCredential{}, fmt.Errorf("a salted password of %d bytes, want %d for %s", len(salted), h().Size(), mechanism)
	}
	stored := h()
	stored.Write(ScramHMAC(h, salted, []byte("Client Key")))
	return ScramCredential{Mechanism: mechanism, Salt: append([]byte(nil), salt...), Iterations: iterations,
		StoredKey: stored.Sum(nil), ServerKey: ScramHMAC(h, salted, []byte("Server Key"))}, nil
}

// NewScramCredentials derives the SCRAM-SHA-256 and -512 credentials of a
// password.
func NewScramCredentials(password string) ([]ScramCredential, error) {
	var out []ScramCredential
	for _, m := range []string{ScramSHA256, ScramSHA512} {
		c, err := NewScramCredential(m, password, DefaultScramIterations)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// ScramHMAC is RFC 5802's HMAC(key, msg) with the mechanism's hash.
func ScramHMAC(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}
