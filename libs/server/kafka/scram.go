package kafka

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"unicode"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// SCRAM users (KIP-554's DescribeUserScramCredentials and
// AlterUserScramCredentials) are the cluster's principals and their SCRAM
// credentials: a user is a principal, described by the mechanisms and
// iteration counts it has credentials for. An upsertion carries the salted
// password the client derived (never the password), from which the broker
// keeps the stored and server keys as for a principal made by sluicectl; a
// principal that does not exist is created with those credentials alone
// (the hash of a random token no one holds: no HTTP access). A deletion removes one mechanism's credential. Both APIs need
// an admin principal (Kafka asks for DESCRIBE or ALTER on the cluster).

// Kafka's SCRAM mechanism numbers.
const (
	scramMechanismSHA256 int8 = 1
	scramMechanismSHA512 int8 = 2
)

// maxScramIterations is Kafka's upper bound on a credential's iterations.
const maxScramIterations = 16384

func scramMechanismName(m int8) (string, bool) {
	switch m {
	case scramMechanismSHA256:
		return cluster.ScramSHA256, true
	case scramMechanismSHA512:
		return cluster.ScramSHA512, true
	}
	return "", false
}

func scramMechanismNumber(name string) int8 {
	if name == cluster.ScramSHA512 {
		return scramMechanismSHA512
	}
	return scramMechanismSHA256
}

// describeUserScramCredentials answers DescribeUserScramCredentials: the
// users asked for (every principal with credentials when none are), each
// with its mechanisms; a user without credentials is RESOURCE_NOT_FOUND, a
// user asked for twice DUPLICATE_RESOURCE.
func (b *Broker) describeUserScramCredentials(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrDescribeUserSCRAMCredentialsResponse()
	snap, code := b.clusterSnapshot(ctx, c, "DescribeUserScramCredentials", cluster.OpDescribe)
	if snap == nil {
		resp.ErrorCode = int16(code)
		return Reply{Msg: resp}
	}
	describe := func(p *cluster.Principal) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = p.Name
		for _, cred := range p.SCRAM {
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism, info.Iterations = scramMechanismNumber(cred.Mechanism), int32(cred.Iterations)
			res.CredentialInfos = append(res.CredentialInfos, info)
		}
		return res
	}
	if r.Users == nil {
		for i := range snap.Principals {
			if p := &snap.Principals[i]; len(p.SCRAM) > 0 {
				resp.Results = append(resp.Results, describe(p))
			}
		}
		return Reply{Msg: resp}
	}
	count := map[string]int{}
	for _, u := range r.Users {
		count[u.Name]++
	}
	for _, u := range r.Users {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u.Name
		p, ok := snap.Principal(u.Name)
		switch {
		case count[u.Name] > 1:
			res.ErrorCode = int16(protocol.DuplicateResource)
		case !ok || len(p.SCRAM) == 0:
			res.ErrorCode = int16(protocol.ResourceNotFound)
			res.ErrorMessage = kmsg.StringPtr("no SCRAM credentials for user " + u.Name)
		default:
			res = describe(p)
		}
		resp.Results = append(resp.Results, res)
	}
	return Reply{Msg: resp}
}

// alterUserScramCredentials answers AlterUserScramCredentials: per user,
// its deletions and upsertions apply together, from the principal the
// metadata leader holds.
func (b *Broker) alterUserScramCredentials(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	admin := b.Admin(c, "AlterUserScramCredentials")
	// Each user's changes, in the order users first appear.
	type change struct {
		deletions  []kmsg.AlterUserSCRAMCredentialsRequestDeletion
		upsertions []kmsg.AlterUserSCRAMCredentialsRequestUpsertion
	}
	var users []string
	changes := map[string]*change{}
	of := func(name string) *change {
		if changes[name] == nil {
			changes[name] = &change{}
			users = append(users, name)
		}
		return changes[name]
	}
	for _, d := range r.Deletions {
		of(d.Name).deletions = append(of(d.Name).deletions, d)
	}
	for _, u := range r.Upsertions {
		of(u.Name).upsertions = append(of(u.Name).upsertions, u)
	}
	changed := false
	for _, name := range users {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = name
		err := protocol.ClusterAuthorizationFailed.Err("altering SCRAM credentials needs an admin principal")
		if admin {
			ch := changes[name]
			err = b.alterScram(ctx, name, ch.deletions, ch.upsertions)
			if err == nil {
				changed = true
				c.Log().Info("kafka SCRAM credentials changed", "user", name, "deletions", len(ch.deletions), "upsertions", len(ch.upsertions))
			}
		}
		res.ErrorCode, res.ErrorMessage = errorFields(err)
		resp.Results = append(resp.Results, res)
	}
	if changed {
		_, _ = b.model.Refresh(ctx) // the client's next describe, and SASL, see it
	}
	return Reply{Msg: resp}
}

// alterScram applies one user's deletions and upsertions.
func (b *Broker) alterScram(ctx context.Context, name string, deletions []kmsg.AlterUserSCRAMCredentialsRequestDeletion,
	upsertions []kmsg.AlterUserSCRAMCredentialsRequestUpsertion) error {
	if name == "" || strings.TrimSpace(name) != name || strings.ContainsFunc(name, unicode.IsControl) {
		return protocol.UnacceptableCredential.Err("user name %q is empty or has surrounding spaces or control characters", name)
	}
	var p cluster.Principal
	exists := false
	if snap := b.Snapshot(ctx); snap != nil {
		if have, ok := snap.Principal(name); ok {
			p, exists = *have, true
			p.SCRAM = slices.Clone(have.SCRAM)
		}
	}
	// Every mechanism once per user, deletions and upsertions together.
	seen := map[int8]bool{}
	mechs := make([]int8, 0, len(deletions)+len(upsertions))
	for _, d := range deletions {
		mechs = append(mechs, d.Mechanism)
	}
	for _, u := range upsertions {
		mechs = append(mechs, u.Mechanism)
	}
	for _, m := range mechs {
		mech, ok := scramMechanismName(m)
		switch {
		case !ok:
			return protocol.UnsupportedSaslMechanism.Err("SCRAM mechanism %d: want 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512)", m)
		case seen[m]:
			return protocol.DuplicateResource.Err("user %s: %s named twice", name, mech)
		}
		seen[m] = true
	}
	for _, d := range deletions {
		mech, _ := scramMechanismName(d.Mechanism)
		i := slices.IndexFunc(p.SCRAM, func(cred cluster.ScramCredential) bool { return cred.Mechanism == mech })
		if i < 0 {
			return protocol.ResourceNotFound.Err("user %s has no %s credential", name, mech)
		}
		p.SCRAM = slices.Delete(p.SCRAM, i, i+1)
	}
	for _, u := range upsertions {
		mech, _ := scramMechanismName(u.Mechanism)
		if u.Iterations > maxScramIterations {
			return protocol.UnacceptableCredential.Err("user %s: %d iterations, at most %d", name, u.Iterations, maxScramIterations)
		}
		cred, err := cluster.ScramCredentialFromSalted(mech, u.Salt, int(u.Iterations), u.SaltedPassword)
		if err != nil {
			return protocol.UnacceptableCredential.Err("user %s: %v", name, err)
		}
		p.SCRAM = slices.DeleteFunc(p.SCRAM, func(c cluster.ScramCredential) bool { return c.Mechanism == mech })
		p.SCRAM = append(p.SCRAM, cred)
	}
	if !exists {
		if len(p.SCRAM) == 0 {
			return protocol.ResourceNotFound.Err("no user %s", name)
		}
		// A principal needs a token: one no one holds.
		token := make([]byte, 32)
		if _, err := rand.Read(token); err != nil {
			return err
		}
		sum := sha256.Sum256(token)
		p.Name, p.TokenSHA256 = name, hex.EncodeToString(sum[:])
	}
	return b.admin.SetPrincipal(ctx, p, false)
}
