package kafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
)

// SASL request keys.
const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// Kafka's SASL error codes.
const (
	codeIllegalSASLState     = 34
	codeUnsupportedMechanism = 33
	codeSASLAuthFailed       = 58
)

// errAuth is every failed authentication: the reason goes to the log, the
// client learns only that it failed (no hint whether the user exists).
var errAuth = errors.New("authentication failed: invalid credentials")

// saslState is a connection's progress through SASL: the mechanism chosen
// by SaslHandshake, and for SCRAM the exchange between its two rounds.
type saslState struct {
	mechanism string
	scram     *scramServer
	// raw: the handshake was v0, so the tokens that follow come as bare
	// size-prefixed frames, not SaslAuthenticate requests.
	raw bool
}

// saslHandshake picks the mechanism of the exchange that follows.
func (s *Server) saslHandshake(_ context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.SASLHandshakeRequest)
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SupportedMechanisms = s.cfg.SASLMechanisms
	switch {
	case c.sasl.mechanism != "" || c.principal != "":
		resp.ErrorCode = codeIllegalSASLState
	case !slices.Contains(s.cfg.SASLMechanisms, r.Mechanism):
		resp.ErrorCode = codeUnsupportedMechanism
		s.logBad("kafka SASL mechanism not offered", "remote", c.remote, "mechanism", r.Mechanism, "offered", s.cfg.SASLMechanisms)
	default:
		c.sasl.mechanism, c.sasl.raw = r.Mechanism, r.Version == 0
	}
	return Reply{Msg: resp}
}

// saslAuthenticate runs one round of the chosen mechanism. A failure is
// answered and closes the connection, as Kafka does.
func (s *Server) saslAuthenticate(_ context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.SASLAuthenticateRequest)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	fail := func(code int16, msg string, reason error) Reply {
		resp.ErrorCode = code
		resp.ErrorMessage = &msg
		c.authFailed(reason)
		return Reply{Msg: resp, Close: true}
	}
	if c.sasl.mechanism == "" || c.sasl.raw || c.authenticated {
		return fail(codeIllegalSASLState, "SaslAuthenticate without a SaslHandshake v1 first, or after authentication", errors.New("out of sequence"))
	}
	out, err := s.saslStep(c, r.SASLAuthBytes)
	if err != nil {
		return fail(codeSASLAuthFailed, errAuth.Error(), err)
	}
	resp.SASLAuthBytes = out
	return Reply{Msg: resp}
}

// saslStep runs one round of the connection's mechanism on a client token
// and returns the server's token; the connection is authenticated when the
// last round succeeds.
func (s *Server) saslStep(c *Conn, token []byte) ([]byte, error) {
	var access *cluster.Snapshot
	if s.access != nil {
		access = s.access()
	}
	if access == nil {
		access = &cluster.Snapshot{}
	}
	var user string
	var out []byte
	var err error
	switch {
	case c.sasl.mechanism == MechanismPlain:
		user, err = checkPlain(access, token)
	case c.sasl.scram == nil: // SCRAM's first round
		c.sasl.scram, out, err = startScram(access, c.sasl.mechanism, token)
		return out, err
	default: // SCRAM's final round
		user = c.sasl.scram.user
		out, err = c.sasl.scram.finish(token)
		c.sasl.scram = nil
	}
	if err != nil {
		return nil, err
	}
	c.principal, c.authenticated = user, true
	c.Log().Debug("kafka client authenticated", "mechanism", c.sasl.mechanism)
	return out, nil
}

// authFailed counts and logs a failed authentication.
func (c *Conn) authFailed(reason error) {
	c.s.metrics.AuthFailed.Inc()
	c.s.logBad("kafka SASL authentication failed", "remote", c.remote, "mechanism", c.sasl.mechanism, "err", reason)
}

// rawSASL runs one round on a bare token (after a v0 handshake): the answer
// is a bare size-prefixed token; a failure closes the connection, as Kafka
// does without SaslAuthenticate to carry an error.
func (c *Conn) rawSASL(token []byte) bool {
	out, err := c.s.saslStep(c, token)
	if err != nil {
		c.authFailed(err)
		return false
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...)
	_, err = c.nc.Write(frame)
	return err == nil
}

// checkPlain checks a PLAIN message (RFC 4616: authzid NUL authcid NUL
// passwd): the password is the principal's bearer token.
func checkPlain(access *cluster.Snapshot, msg []byte) (string, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", fmt.Errorf("PLAIN message has %d fields, want 3", len(parts))
	}
	authz, user, pass := string(parts[0]), string(parts[1]), parts[2]
	if authz != "" && authz != user {
		return "", fmt.Errorf("authorization id %q differs from the user %q", authz, user)
	}
	p, ok := access.Principal(user)
	if !ok {
		return "", fmt.Errorf("no principal %q", user)
	}
	sum := sha256.Sum256(pass)
	want, err := hex.DecodeString(p.TokenSHA256)
	if err != nil || subtle.ConstantTimeCompare(sum[:], want) != 1 {
		return "", fmt.Errorf("wrong password for principal %q", user)
	}
	return user, nil
}

// scramServer is the server side of one SCRAM exchange (RFC 5802).
type scramServer struct {
	user      string
	known     bool // the principal exists and has a credential
	cred      cluster.ScramCredential
	gs2       string // the client's GS2 header
	nonce     string // client nonce + server nonce
	authFirst string // client-first-message-bare "," server-first-message
}

// startScram reads client-first-message and answers server-first-message.
// An unknown user gets a made-up salt and fails only at the proof, so the
// exchange does not tell which users exist.
func startScram(access *cluster.Snapshot, mechanism string, msg []byte) (*scramServer, []byte, error) {
	m := string(msg)
	gs2, bare, ok := cutGS2(m)
	if !ok {
		return nil, nil, fmt.Errorf("client-first message has no GS2 header")
	}
	if strings.HasPrefix(gs2, "p=") {
		return nil, nil, errors.New("channel binding is not supported")
	}
	attrs := scramAttrs(bare)
	user, err := decodeSaslName(attrs["n"])
	if err != nil || user == "" || attrs["r"] == "" {
		return nil, nil, fmt.Errorf("client-first message lacks a user or a nonce")
	}
	if strings.Contains(bare, "tokenauth=true") {
		return nil, nil, errors.New("delegation tokens are not supported")
	}
	sc := &scramServer{user: user, gs2: gs2}
	if p, ok := access.Principal(user); ok {
		sc.cred, sc.known = p.Scram(mechanism)
	}
	if !sc.known {
		h, _ := cluster.ScramHash(mechanism)
		salt := cluster.ScramHMAC(h, []byte("sluice-unknown-user"), []byte(user))[:24]
		sc.cred = cluster.ScramCredential{Mechanism: mechanism, Salt: salt, Iterations: cluster.DefaultScramIterations}
	}
	var snonce [18]byte
	if _, err := rand.Read(snonce[:]); err != nil {
		return nil, nil, err
	}
	sc.nonce = attrs["r"] + base64.RawStdEncoding.EncodeToString(snonce[:])
	first := "r=" + sc.nonce + ",s=" + base64.StdEncoding.EncodeToString(sc.cred.Salt) + ",i=" + strconv.Itoa(sc.cred.Iterations)
	sc.authFirst = bare + "," + first
	return sc, []byte(first), nil
}

// finish checks client-final-message's proof and answers
// server-final-message.
func (sc *scramServer) finish(msg []byte) ([]byte, error) {
	m := string(msg)
	i := strings.LastIndex(m, ",p=")
	if i < 0 {
		return nil, errors.New("client-final message has no proof")
	}
	withoutProof, proofB64 := m[:i], m[i+3:]
	attrs := scramAttrs(withoutProof)
	if cb, err := base64.StdEncoding.DecodeString(attrs["c"]); err != nil || string(cb) != sc.gs2 {
		return nil, errors.New("channel binding attribute does not match the GS2 header")
	}
	// The nonce must end with the one the server sent: librdkafka puts
	// its own nonce in front of the whole server nonce (which already
	// starts with it), and Kafka brokers accept that.
	if !strings.HasSuffix(attrs["r"], sc.nonce) {
		return nil, errors.New("nonce does not match")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return nil, errors.New("proof is not base64")
	}
	h, _ := cluster.ScramHash(sc.cred.Mechanism)
	authMsg := []byte(sc.authFirst + "," + withoutProof)
	if !sc.known || len(proof) != h().Size() {
		return nil, fmt.Errorf("no %s credential for %q, or a proof of the wrong size", sc.cred.Mechanism, sc.user)
	}
	clientKey := cluster.ScramHMAC(h, sc.cred.StoredKey, authMsg) // the client signature, then the key
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	stored := h()
	stored.Write(clientKey)
	if subtle.ConstantTimeCompare(stored.Sum(nil), sc.cred.StoredKey) != 1 {
		return nil, fmt.Errorf("wrong password for principal %q", sc.user)
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(cluster.ScramHMAC(h, sc.cred.ServerKey, authMsg))), nil
}

// cutGS2 splits a client-first message into its GS2 header (through the
// second comma) and the bare message.
func cutGS2(m string) (gs2, bare string, ok bool) {
	i := strings.Index(m, ",")
	if i < 0 {
		return "", "", false
	}
	j := strings.Index(m[i+1:], ",")
	if j < 0 {
		return "", "", false
	}
	return m[:i+j+2], m[i+j+2:], true
}

// scramAttrs parses "k=v,k=v" (values may hold '=').
func scramAttrs(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && len(k) == 1 {
			if _, dup := out[k]; !dup {
				out[k] = v
			}
		}
	}
	return out
}

// decodeSaslName undoes RFC 5802's escaping of ',' and '=' in user names.
func decodeSaslName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("bad escape in user name %q", s)
		}
		i += 2
	}
	return b.String(), nil
}
