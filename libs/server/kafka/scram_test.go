package kafka

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// TestDescribeUserScramCredentials: principals with credentials, by name
// or all; a user without credentials and a user named twice answer their
// errors; a principal that is no admin is refused.
func TestDescribeUserScramCredentials(t *testing.T) {
	b, m, _ := testBroker(true)
	cred, err := cluster.NewScramCredential(cluster.ScramSHA512, "pw", 8192)
	if err != nil {
		t.Fatal(err)
	}
	m.snap.Principals[0].SCRAM = []cluster.ScramCredential{cred} // alice
	describe := func(who string, users ...string) *kmsg.DescribeUserSCRAMCredentialsResponse {
		req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		for _, u := range users {
			ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			ru.Name = u
			req.Users = append(req.Users, ru)
		}
		return b.describeUserScramCredentials(context.Background(), connAs(who), req).Msg.(*kmsg.DescribeUserSCRAMCredentialsResponse)
	}
	all := describe("root")
	if len(all.Results) != 1 || all.Results[0].User != "alice" || len(all.Results[0].CredentialInfos) != 1 ||
		all.Results[0].CredentialInfos[0].Mechanism != scramMechanismSHA512 || all.Results[0].CredentialInfos[0].Iterations != 8192 {
		t.Fatalf("every user: %+v", all.Results)
	}
	named := describe("root", "alice", "root", "bob", "bob")
	var codes []int16
	for _, r := range named.Results {
		codes = append(codes, r.ErrorCode)
	}
	nf, dup := int16(protocol.ResourceNotFound), int16(protocol.DuplicateResource)
	if !slices.Equal(codes, []int16{0, nf, dup, dup}) {
		t.Fatalf("alice, root (no credentials), bob twice: codes %v", codes)
	}
	if resp := describe("alice"); resp.ErrorCode != int16(protocol.ClusterAuthorizationFailed) {
		t.Fatalf("alice describing: %d", resp.ErrorCode)
	}
}

// TestAlterUserScramCredentials: an upsertion keeps the keys of the salted
// password the client derived (a new user becomes a principal with a token
// no one holds), a deletion removes a mechanism; bad mechanisms,
// iterations, salted passwords and names are refused per user, nothing
// set for them.
func TestAlterUserScramCredentials(t *testing.T) {
	b, m, a := testBroker(true)
	have, err := cluster.NewScramCredential(cluster.ScramSHA256, "old", 4096)
	if err != nil {
		t.Fatal(err)
	}
	m.snap.Principals[0].SCRAM = []cluster.ScramCredential{have} // alice
	salt := []byte("0123456789abcdef")
	salted := func(n int) []byte {
		k, err := pbkdf2.Key(sha256.New, "secret", salt, n, sha256.Size)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	up := func(name string, mech int8, iterations int32, pw []byte) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iterations, salt, pw
		return u
	}
	del := func(name string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mech
		return d
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up("carol", scramMechanismSHA256, 4096, salted(4096)),
		up("dave", scramMechanismSHA256, 100, salted(100)),
		up("erin", 3, 4096, salted(4096)),
		up("frank", scramMechanismSHA512, 4096, salted(4096)), // a SHA-256 sized key for SHA-512
		up(" gina", scramMechanismSHA256, 4096, salted(4096)),
		up("hank", scramMechanismSHA256, 4096, salted(4096)),
	}
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("alice", scramMechanismSHA256), del("ivy", scramMechanismSHA512),
		del("hank", scramMechanismSHA256)}
	resp := b.alterUserScramCredentials(context.Background(), connAs("root"), req).Msg.(*kmsg.AlterUserSCRAMCredentialsResponse)
	got := map[string]int16{}
	for _, r := range resp.Results {
		got[r.User] = r.ErrorCode
	}
	un := int16(protocol.UnacceptableCredential)
	want := map[string]int16{"alice": 0, "carol": 0, "dave": un, "erin": int16(protocol.UnsupportedSaslMechanism), "frank": un, " gina": un,
		"hank": int16(protocol.DuplicateResource), "ivy": int16(protocol.ResourceNotFound)}
	for u, code := range want {
		if got[u] != code {
			t.Errorf("%q: code %d, want %d", u, got[u], code)
		}
	}
	if len(a.principals) != 2 {
		t.Fatalf("principals set: %+v", a.principals)
	}
	alice, carol := a.principals[0], a.principals[1]
	if alice.Name != "alice" || len(alice.SCRAM) != 0 || alice.TokenSHA256 != m.snap.Principals[0].TokenSHA256 {
		t.Fatalf("alice after her SHA-256 credential's deletion: %+v", alice)
	}
	wantCred, err := cluster.ScramCredentialFromSalted(cluster.ScramSHA256, salt, 4096, salted(4096))
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := hex.DecodeString(carol.TokenSHA256); carol.Name != "carol" || err != nil || len(sum) != 32 || len(carol.SCRAM) != 1 ||
		!bytes.Equal(carol.SCRAM[0].StoredKey, wantCred.StoredKey) || !bytes.Equal(carol.SCRAM[0].ServerKey, wantCred.ServerKey) {
		t.Fatalf("carol: %+v", carol)
	}
	// An upsertion of a mechanism the user has replaces its credential.
	m.snap.Principals[0].SCRAM = []cluster.ScramCredential{have}
	a.principals = nil
	replace := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	replace.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{up("alice", scramMechanismSHA256, 4096, salted(4096))}
	if r := b.alterUserScramCredentials(context.Background(), connAs("root"), replace).Msg.(*kmsg.AlterUserSCRAMCredentialsResponse); r.Results[0].ErrorCode != 0 ||
		len(a.principals) != 1 || len(a.principals[0].SCRAM) != 1 || !bytes.Equal(a.principals[0].SCRAM[0].StoredKey, wantCred.StoredKey) {
		t.Fatalf("replacing alice's SHA-256 credential: %+v, %+v", r.Results, a.principals)
	}
	denied := b.alterUserScramCredentials(context.Background(), connAs("alice"), req).Msg.(*kmsg.AlterUserSCRAMCredentialsResponse)
	for _, r := range denied.Results {
		if r.ErrorCode != int16(protocol.ClusterAuthorizationFailed) {
			t.Fatalf("alice altering %s: %d", r.User, r.ErrorCode)
		}
	}
}
