package ctl

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/sluicemq/sluice/libs/cluster"
)

// userCreate makes a principal with a new random bearer token, prints the
// token (the only time it is seen: metadata keeps its SHA-256, and the
// SCRAM-SHA-256/512 credentials Kafka clients authenticate with, the token
// being the password) and commits the principal through metadata.
func userCreate(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("user create", flag.ContinueOnError)
	admin := fs.Bool("admin", false, "the principal may do everything: topic and cluster changes, the console")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "a user name"); err != nil {
		return err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	token := hex.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(token))
	scram, err := cluster.NewScramCredentials(token)
	if err != nil {
		return err
	}
	p := cluster.Principal{Name: pos[0], TokenSHA256: hex.EncodeToString(sum[:]), Admin: *admin, SCRAM: scram}
	if err := env.metadataClient().SetPrincipal(ctx, p, false); err != nil {
		return fmt.Errorf("create user %s: %w", pos[0], err)
	}
	fmt.Fprintln(env.Stdout, token)
	fmt.Fprintf(env.Stderr, "user %s created (admin %v); its token was printed once and is stored only hashed\n", pos[0], *admin)
	return nil
}

func userDelete(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("user delete", flag.ContinueOnError)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "a user name"); err != nil {
		return err
	}
	if err := env.metadataClient().SetPrincipal(ctx, cluster.Principal{Name: pos[0]}, true); err != nil {
		return fmt.Errorf("delete user %s: %w", pos[0], err)
	}
	fmt.Fprintf(env.Stdout, "user %s deleted, with its ACLs\n", pos[0])
	return nil
}

func userList(ctx context.Context, env Env, args []string) error {
	_, o, err := parseOutputCommand("user list", args, 0, "no arguments")
	if err != nil {
		return err
	}
	snap, err := env.metadataClient().Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("user list: %w", err)
	}
	type user struct {
		Name  string `json:"name"`
		Admin bool   `json:"admin"`
	}
	users := []user{}
	for _, p := range snap.Principals {
		users = append(users, user{p.Name, p.Admin})
	}
	if o == "json" {
		return writeJSON(env, users)
	}
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "USER\tADMIN")
	for _, u := range users {
		fmt.Fprintf(w, "%s\t%v\n", u.Name, u.Admin)
	}
	return w.Flush()
}

// aclChange adds or deletes an ACL.
func aclChange(ctx context.Context, env Env, del bool, args []string) error {
	fs := flag.NewFlagSet("acl", flag.ContinueOnError)
	user := fs.String("user", "", "the principal")
	topic := fs.String("topic", "", "a topic name, * for every topic, or with --prefixed the start of topic names")
	group := fs.String("group", "", "instead of --topic, a consumer or share group (a consume ACL, Kafka's READ on the group; with --operation delete or describe, its DELETE or DESCRIBE)")
	txnID := fs.String("transactional-id", "", "instead of --topic, a transactional id (a produce ACL, Kafka's WRITE on the id; with --operation describe, its DESCRIBE)")
	onCluster := fs.Bool("cluster", false, "instead of --topic, the cluster (Kafka's CLUSTER): --operation create, alter, describe, alter_configs, describe_configs or idempotent_write")
	op := fs.String("operation", "", "produce, consume or (of a topic) describe, create, delete, alter, alter_configs or describe_configs (for --group: consume, delete or describe; for --transactional-id: produce or describe)")
	prefixed := fs.Bool("prefixed", false, "the ACL covers every topic whose name starts with --topic (Kafka's PREFIXED pattern)")
	deny := fs.Bool("deny", false, "the ACL denies the operation; a deny wins over every allow (Kafka's DENY)")
	host := fs.String("host", "", "an IP address: the ACL applies to requests from it alone (default: every host)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 0, "no positional arguments"); err != nil {
		return err
	}
	a := cluster.ACL{Principal: *user, Topic: *topic, Operation: *op, Deny: *deny, Host: *host}
	named := 0
	for _, n := range []string{*topic, *group, *txnID} {
		if n != "" {
			named++
		}
	}
	if *onCluster {
		named++
	}
	switch {
	case named != 1:
		return fmt.Errorf("%w: acl add/delete names one of --topic, --group, --transactional-id and --cluster", errUsage)
	case *group != "":
		a.Resource, a.Topic = cluster.ResourceGroup, *group
		a.Operation = cmp.Or(a.Operation, cluster.OpConsume)
	case *txnID != "":
		a.Resource, a.Topic = cluster.ResourceTransactionalID, *txnID
		a.Operation = cmp.Or(a.Operation, cluster.OpProduce)
	case *onCluster:
		a.Resource, a.Topic = cluster.ResourceCluster, cluster.ClusterName
	}
	if *user == "" || a.Operation == "" {
		return fmt.Errorf("%w: acl add/delete needs --user and, for a topic or the cluster, --operation", errUsage)
	}
	if *prefixed {
		a.Pattern = cluster.PatternPrefixed
	}
	if err := env.metadataClient().SetACL(ctx, a, del); err != nil {
		return fmt.Errorf("acl: %w", err)
	}
	verb := "added"
	if del {
		verb = "deleted"
	}
	from := ""
	if a.Host != "" && a.Host != "*" {
		from = " from " + a.Host
	}
	fmt.Fprintf(env.Stdout, "ACL %s: %s %s %s on %s%s\n", verb, a.Principal, permission(a), a.Operation, aclTopics(a), from)
	return nil
}

// permission is an ACL's verb: "may" or "may not".
func permission(a cluster.ACL) string {
	if a.Deny {
		return "may not"
	}
	return "may"
}

// aclTopics names what an ACL's pattern covers.
func aclTopics(a cluster.ACL) string {
	kind := "topic"
	switch a.Resource {
	case cluster.ResourceGroup:
		kind = "group"
	case cluster.ResourceTransactionalID:
		kind = "transactional id"
	case cluster.ResourceCluster:
		return "the cluster"
	}
	if a.Pattern == cluster.PatternPrefixed {
		return kind + "s starting with " + a.Topic
	}
	return kind + " " + a.Topic
}

func aclList(ctx context.Context, env Env, args []string) error {
	_, o, err := parseOutputCommand("acl list", args, 0, "no arguments")
	if err != nil {
		return err
	}
	snap, err := env.metadataClient().Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("acl list: %w", err)
	}
	acls := snap.ACLs
	if acls == nil {
		acls = []cluster.ACL{}
	}
	if o == "json" {
		return writeJSON(env, acls)
	}
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "USER\tRESOURCE\tNAME\tPATTERN\tOPERATION\tPERMISSION\tHOST")
	for _, a := range acls {
		resource, pattern, perm := cmp.Or(a.Resource, "topic"), cmp.Or(a.Pattern, cluster.PatternLiteral), "allow"
		if a.Deny {
			perm = "deny"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Principal, resource, a.Topic, pattern, a.Operation, perm, cmp.Or(a.Host, "*"))
	}
	return w.Flush()
}
