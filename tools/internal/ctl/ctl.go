// Package ctl implements sluicectl, the command-line client of a Sluice cluster:
// topics, partition reassignment and node decommission, producing from stdin, consuming to stdout with kcat-style formats
// (alone or as a consumer-group member), consumer groups, and cluster status. Every command exits non-zero with the reason on stderr when
// anything fails.
package ctl

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/server/version"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/storageclient"
	"github.com/sluicemq/sluice/libs/tlsconf"
	"github.com/sluicemq/sluice/libs/txns"
)

// Defaults point at the local cluster that `make run` starts.
const (
	DefaultFrontend = "http://127.0.0.1:8080"
	DefaultMetadata = "http://127.0.0.1:7070,http://127.0.0.1:7073,http://127.0.0.1:7076"
	DefaultOffsets  = "http://127.0.0.1:7080,http://127.0.0.1:7083,http://127.0.0.1:7086"
)

// Env is what a command runs against.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Frontend       string
	Metadata       string
	Offsets        string
	// Token is the principal's bearer token for frontends that require
	// authentication; empty: none sent.
	Token string
	// TLS is used with every service when the cluster runs TLS (https for
	// addresses without a scheme); nil: plain HTTP and TCP.
	TLS *tls.Config
}

// frontendAdmin returns a client of the frontends' admin routes.
func (e Env) frontendAdmin() *cluster.Client {
	return cluster.NewClientTLS(addrs(e.Frontend), e.TLS).WithToken(e.Token)
}

// metadataClient returns a client of the metadata service.
func (e Env) metadataClient() *cluster.Client { return cluster.NewClientTLS(addrs(e.Metadata), e.TLS) }

// groupsClient returns a client of the offsets service.
func (e Env) groupsClient() *groups.Client { return groups.NewClientTLS(addrs(e.Offsets), e.TLS) }

// txnsClient returns a client of the offsets service's transaction
// coordinator.
func (e Env) txnsClient() *txns.Client { return txns.NewClientTLS(addrs(e.Offsets), e.TLS) }

// sharesClient returns a client of the offsets service's share groups.
func (e Env) sharesClient() *shares.Client { return shares.NewClientTLS(addrs(e.Offsets), e.TLS) }

// storagePool returns a pool of storage connections for this command.
func (e Env) storagePool() *storageclient.Pool { return storageclient.NewPoolTLS("sluicectl", e.TLS) }

const usage = `sluicectl: the command-line client of a Sluice cluster

usage: sluicectl [--frontend URL] [--metadata URL] [--offsets URL] [--token TOKEN]
                 [--tls-ca FILE [--tls-cert FILE --tls-key FILE]] COMMAND ...

  topic create NAME [--partitions N] [--replication-factor R] [--config k=v ...]   R: the cluster's default (3, at most the live storage nodes)
  topic list [-o json]
  topic describe NAME [-o json]
  topic delete NAME
  topic alter NAME [--config k=v ...] [--delete-config k ...]   applied live by the storage nodes
  topic add-partitions NAME --partitions N   N is the new total; keys move to other partitions
  partition reassign TOPIC/P --replicas ID,ID,... [--no-wait] [--timeout D]
                the new replicas copy the log and join the ISR, then the others leave
  partition reassign TOPIC/P --cancel
  node decommission ID [--no-wait] [--timeout D]   moves every replica off the node
  node recommission ID                             lets new replicas go there again
  user create NAME [--admin]   prints the new principal's bearer token (kept hashed): HTTP bearer token and Kafka SASL password
  user delete NAME
  user list [-o json]
  acl add|delete --user NAME (--topic T|'*' [--prefixed] | --group G | --transactional-id ID | --cluster)
                 --operation OP [--deny] [--host IP]   OP: security.md's ACL tables
  acl list [-o json]
  quota set (--client-id ID | --default) [--produce-bytes-per-sec N] [--fetch-bytes-per-sec N]
                byte rates per client id, enforced by each frontend and storage node
  quota delete (--client-id ID | --default)
  quota list [-o json]
  produce TOPIC [--key-separator S] [--client-id ID] [--acks all|leader|none] [--partition P]
                [--compression none|gzip|snappy|lz4|zstd] [--linger DURATION]
  consume TOPIC [--partition P] [--from-beginning | --offset N] [--max-messages N]
                [--exit-at-end] [--format FMT]
  consume TOPIC --group G [--from-beginning] [--max-messages N] [--exit-at-end]
                [--format FMT]
  group list [-o json]
  group describe G [-o json]
  group reset-offsets G --topic T [--partitions 0,1]
                --to-earliest | --to-latest | --to-datetime RFC3339 | --to-offset N
                [--dry-run] [-o json]
  group delete G
  share-group list [-o json]
  share-group describe G [-o json]
  share-group config G KEY=VALUE...
  share-group reset-offsets G --topic T [--partitions 0,1]
                --to-earliest | --to-latest | --to-datetime RFC3339 | --to-offset N
                [--dry-run] [-o json]
  share-group delete G
  dead-letter replay DLT-TOPIC [--to TOPIC] [--partition P] [--from-offset N]
  txn list [--state S,...] [-o json]
  txn describe TRANSACTIONAL-ID [-o json]
  cluster status [-o json]
  version       the version, the commit and the Go version (also --version)
  cluster config [--set KEY=VALUE ...] [--delete KEY ...] [-o json]
                cluster-wide settings: default.replication.factor, min.insync.replicas,
                num.partitions, auto.create.topics.enable; changes apply at once

--frontend ($SLUICE_FRONTEND, default ` + DefaultFrontend + `) takes produce, topic, partition and node changes;
--metadata ($SLUICE_METADATA, default ` + DefaultMetadata + `)
  answers reads and finds partition leaders; any voter will do.
--offsets ($SLUICE_OFFSETS, default ` + DefaultOffsets + `)
  lists the offsets service's replicas, for consumer groups.
--token ($SLUICE_TOKEN) authenticates with frontends started with -require-auth; user and acl
  commands go to metadata.
--tls-ca, --tls-cert, --tls-key ($SLUICE_TLS_CA, $SLUICE_TLS_CERT, $SLUICE_TLS_KEY) are for
  a cluster running TLS (with a client certificate for mutual TLS).
consume --group joins the group: it reads the partitions the group assigns it from
their committed offsets (or the end, or the beginning with --from-beginning, when
there is none) and commits what it printed on exit. --exit-at-end stops once every
assigned partition is read to its end. group reset-offsets and group delete need a
group without members. A share group's reset-offsets and delete need no record
under lock; its config keys are share.auto.offset.reset, share.record.lock.duration.ms,
share.delivery.count.limit, share.max.fetch.records, share.partition.max.record.locks and
errors.deadletter.topic. dead-letter replay produces each record of a dead-letter topic
again to the topic and partition it came from (or to --to), without the sluice.dlt.*
headers; replaying twice produces twice.
--format takes kcat's placeholders: %t topic, %p partition, %o offset, %k key, %s value,
%T timestamp, %h headers, \n and \t.
`

// errUsage marks a usage error (exit status 2).
var errUsage = errors.New("usage")

// Main runs sluicectl with args (without the program name) and returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Frontend: envOr("SLUICE_FRONTEND", DefaultFrontend),
		Metadata: envOr("SLUICE_METADATA", DefaultMetadata), Offsets: envOr("SLUICE_OFFSETS", DefaultOffsets)}
	fs := flag.NewFlagSet("sluicectl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&env.Frontend, "frontend", env.Frontend, "frontend URL")
	fs.StringVar(&env.Metadata, "metadata", env.Metadata, "metadata URL")
	fs.StringVar(&env.Offsets, "offsets", env.Offsets, "offsets service URLs, comma-separated")
	fs.StringVar(&env.Token, "token", os.Getenv("SLUICE_TOKEN"), "bearer token of a principal, for frontends that require authentication")
	tlsCA := fs.String("tls-ca", os.Getenv("SLUICE_TLS_CA"), "PEM CA to verify the services with (a cluster running TLS)")
	tlsCert := fs.String("tls-cert", os.Getenv("SLUICE_TLS_CERT"), "PEM client certificate, for services that require one")
	tlsKey := fs.String("tls-key", os.Getenv("SLUICE_TLS_KEY"), "PEM key of --tls-cert")
	showVersion := fs.Bool("version", false, "print the version, the commit and the Go version, and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			io.WriteString(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "sluicectl: %v\n\n", err)
		io.WriteString(stderr, usage)
		return 2
	}
	if *showVersion || len(fs.Args()) == 1 && fs.Arg(0) == "version" {
		fmt.Fprintln(stdout, version.String("sluicectl"))
		return 0
	}
	if *tlsCA != "" || *tlsCert != "" {
		cfg, err := tlsconf.ClientFiles(*tlsCA, *tlsCert, *tlsKey)
		if err != nil {
			fmt.Fprintf(stderr, "sluicectl: %v\n", err)
			return 2
		}
		env.TLS = cfg
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := dispatch(ctx, env, fs.Args())
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "sluicectl: %v\n\n", err)
		io.WriteString(stderr, usage)
		return 2
	default:
		fmt.Fprintf(stderr, "sluicectl: %v\n", err)
		return 1
	}
}

func dispatch(ctx context.Context, env Env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no command", errUsage)
	}
	cmd, rest := args[0], args[1:]
	if run, ok := commands[cmd]; ok {
		return run(ctx, env, rest)
	}
	sub := ""
	if len(rest) > 0 {
		sub = rest[0]
		if run, ok := commands[cmd+" "+sub]; ok {
			return run(ctx, env, rest[1:])
		}
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, strings.TrimSpace(cmd+" "+sub))
}

// command runs one of sluicectl's commands with the arguments after its
// name.
type command func(ctx context.Context, env Env, args []string) error

// commands are sluicectl's commands by name: "topic create", or "produce"
// for those without a subcommand.
var commands = map[string]command{
	"topic create":              topicCreate,
	"topic list":                topicList,
	"topic describe":            topicDescribe,
	"topic delete":              topicDelete,
	"topic alter":               topicAlter,
	"topic add-partitions":      topicAddPartitions,
	"partition reassign":        partitionReassign,
	"node decommission":         nodeDecommission,
	"node recommission":         nodeRecommission,
	"user create":               userCreate,
	"user delete":               userDelete,
	"user list":                 userList,
	"acl add":                   func(ctx context.Context, env Env, args []string) error { return aclChange(ctx, env, false, args) },
	"acl delete":                func(ctx context.Context, env Env, args []string) error { return aclChange(ctx, env, true, args) },
	"acl list":                  aclList,
	"quota set":                 quotaSet,
	"quota delete":              quotaDelete,
	"quota list":                quotaList,
	"produce":                   produce,
	"consume":                   consume,
	"group list":                groupList,
	"group describe":            groupDescribe,
	"group reset-offsets":       groupResetOffsets,
	"group delete":              groupDelete,
	"share-group list":          shareList,
	"share-group describe":      shareDescribe,
	"share-group reset-offsets": shareResetOffsets,
	"share-group delete":        shareDelete,
	"share-group config":        shareConfig,
	"dead-letter replay":        deadLetterReplay,
	"txn list":                  txnList,
	"txn describe":              txnDescribe,
	"cluster status":            clusterStatus,
	"cluster config":            clusterConfig,
	"help": func(_ context.Context, env Env, _ []string) error {
		_, err := io.WriteString(env.Stdout, usage)
		return err
	},
}

// parseArgs parses flags that may come before, between or after positional
// arguments and returns the positional ones.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// exactly checks the number of positional arguments.
func exactly(pos []string, n int, what string) error {
	if len(pos) != n {
		return fmt.Errorf("%w: want %s, got %d argument(s)", errUsage, what, len(pos))
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// parseOutputCommand parses the arguments of a read command that takes only
// -o table|json and n positional arguments (described by what).
func parseOutputCommand(name string, args []string, n int, what string) (pos []string, output string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	o := fs.String("o", "table", "output format: table or json")
	if pos, err = parseArgs(fs, args); err != nil {
		return nil, "", err
	}
	if err := exactly(pos, n, what); err != nil {
		return nil, "", err
	}
	if err := checkOutput(*o); err != nil {
		return nil, "", err
	}
	return pos, *o, nil
}

// checkOutput checks an -o value.
func checkOutput(o string) error {
	if o != "table" && o != "json" {
		return fmt.Errorf("%w: -o %q is not table or json", errUsage, o)
	}
	return nil
}

// addrs splits a comma-separated address flag.
func addrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
