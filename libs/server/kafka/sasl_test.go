package kafka

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
)

// rfc7677 is the SCRAM-SHA-256 example of RFC 7677 section 3 (user "user",
// password "pencil").
var rfc7677 = struct {
	user, password, clientFirst, serverFirst, clientFinal, serverFinal, nonce, salt string
}{
	user: "user", password: "pencil",
	clientFirst: "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
	serverFirst: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
	clientFinal: "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
	serverFinal: "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
	nonce:       "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
	salt:        "W22ZaJ0SNY7soEsUEjb6gQ==",
}

// rfcCredential derives the server's credential of the RFC's user.
func rfcCredential(t *testing.T) cluster.ScramCredential {
	t.Helper()
	salt, _ := base64.StdEncoding.DecodeString(rfc7677.salt)
	salted, err := pbkdf2.Key(sha256.New, rfc7677.password, salt, 4096, 32)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	return cluster.ScramCredential{Mechanism: cluster.ScramSHA256, Salt: salt, Iterations: 4096, StoredKey: stored[:], ServerKey: mac(salted, "Server Key")}
}

// TestScramServerRFC7677 runs the server side against the RFC's exchange:
// the client's proof is accepted and the server's signature is the RFC's.
func TestScramServerRFC7677(t *testing.T) {
	access := &cluster.Snapshot{Principals: []cluster.Principal{{Name: rfc7677.user, SCRAM: []cluster.ScramCredential{rfcCredential(t)}}}}
	sc, first, err := startScram(access, cluster.ScramSHA256, []byte(rfc7677.clientFirst))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(first), "r=rOprNGfwEbeRWgbNEkqO") || !strings.Contains(string(first), ",s="+rfc7677.salt+",i=4096") {
		t.Fatalf("server-first %q", first)
	}
	// Replay the RFC's server nonce, as if this server had drawn it.
	sc.nonce, sc.authFirst = rfc7677.nonce, strings.TrimPrefix(rfc7677.clientFirst, "n,,")+","+rfc7677.serverFirst
	final, err := sc.finish([]byte(rfc7677.clientFinal))
	if err != nil {
		t.Fatal(err)
	}
	if string(final) != rfc7677.serverFinal {
		t.Fatalf("server-final %q, want %q", final, rfc7677.serverFinal)
	}
	// librdkafka repeats its nonce in front of the server's: accepted.
	sc.nonce = rfc7677.nonce
	// (The proof covers the message as sent, so this one fails at the
	// proof, after the nonce check.)
	doubled := strings.Replace(rfc7677.clientFinal, "r=", "r=rOprNGfwEbeRWgbNEkqO", 1)
	if _, err := sc.finish([]byte(doubled)); err == nil || strings.Contains(err.Error(), "nonce") {
		t.Fatalf("a nonce ending with the server's: %v, want it past the nonce check", err)
	}
}

// TestScramServerRefuses checks the refusals: a wrong proof, a nonce that
// is not the server's, an unknown user (who still gets a salt, so the
// exchange does not tell who exists), channel binding and tokens.
func TestScramServerRefuses(t *testing.T) {
	access := &cluster.Snapshot{Principals: []cluster.Principal{{Name: rfc7677.user, SCRAM: []cluster.ScramCredential{rfcCredential(t)}}}}
	start := func(user string) *scramServer {
		t.Helper()
		sc, first, err := startScram(access, cluster.ScramSHA256, []byte("n,,n="+user+",r=rOprNGfwEbeRWgbNEkqO"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(first), ",s=") {
			t.Fatalf("no salt for %q: %q", user, first)
		}
		sc.nonce, sc.authFirst = rfc7677.nonce, "n="+user+",r=rOprNGfwEbeRWgbNEkqO,"+rfc7677.serverFirst
		return sc
	}
	badProof := strings.Replace(rfc7677.clientFinal, "p=dHzb", "p=eHzb", 1)
	if _, err := start("user").finish([]byte(badProof)); err == nil {
		t.Fatal("a wrong proof was accepted")
	}
	otherNonce := strings.Replace(rfc7677.clientFinal, "k0,p=", "k1,p=", 1)
	if _, err := start("user").finish([]byte(otherNonce)); err == nil {
		t.Fatal("a nonce that is not the server's was accepted")
	}
	if _, err := start("nobody").finish([]byte(rfc7677.clientFinal)); err == nil {
		t.Fatal("an unknown user was accepted")
	}
	for _, msg := range []string{"p=tls-unique,,n=user,r=abc", "n,,n=user,r=abc,tokenauth=true", "n,,r=abc", "garbage", "n,,n=us=2Xer,r=abc"} {
		if _, _, err := startScram(access, cluster.ScramSHA256, []byte(msg)); err == nil {
			t.Fatalf("client-first %q was accepted", msg)
		}
	}
	if name, err := decodeSaslName("a=2Cb=3Dc"); err != nil || name != "a,b=c" {
		t.Fatalf("decodeSaslName: %q %v", name, err)
	}
}

// TestCheckPlain checks PLAIN against the principals' token hashes.
func TestCheckPlain(t *testing.T) {
	sum := sha256.Sum256([]byte("s3cret"))
	access := &cluster.Snapshot{Principals: []cluster.Principal{{Name: "alice", TokenSHA256: hex.EncodeToString(sum[:])}}}
	for _, tc := range []struct {
		msg string
		ok  bool
	}{
		{"\x00alice\x00s3cret", true},
		{"alice\x00alice\x00s3cret", true},
		{"bob\x00alice\x00s3cret", false},
		{"\x00alice\x00wrong", false},
		{"\x00nobody\x00s3cret", false},
		{"alice\x00s3cret", false},
		{"", false},
	} {
		name, err := checkPlain(access, []byte(tc.msg))
		if (err == nil) != tc.ok || tc.ok && name != "alice" {
			t.Errorf("PLAIN %q: %q, %v; want ok %v", tc.msg, name, err, tc.ok)
		}
	}
}

// TestNewScramCredentialMatchesRFC checks the credential derivation that
// sluicectl uses against the RFC's keys.
func TestNewScramCredentialMatchesRFC(t *testing.T) {
	want := rfcCredential(t)
	got, err := cluster.NewScramCredential(cluster.ScramSHA256, rfc7677.password, 4096)
	if err != nil {
		t.Fatal(err)
	}
	// Same password, new salt: the keys differ, but a server given the
	// derived credential checks an exchange made with that salt.
	if hex.EncodeToString(got.StoredKey) == hex.EncodeToString(want.StoredKey) {
		t.Fatal("a new salt gave the RFC's keys")
	}
	salted, _ := pbkdf2.Key(sha256.New, rfc7677.password, got.Salt, 4096, 32)
	m := hmac.New(sha256.New, salted)
	m.Write([]byte("Server Key"))
	if !hmac.Equal(m.Sum(nil), got.ServerKey) {
		t.Fatal("server key is not HMAC(SaltedPassword, \"Server Key\")")
	}
	if _, err := cluster.NewScramCredential(cluster.ScramSHA256, "x", 100); err == nil {
		t.Fatal("an iteration count below 4096 was accepted")
	}
}
