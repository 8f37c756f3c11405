package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicemq/sluice/libs/txns"
)

// txnList prints the transactional ids, of some states with --state.
func txnList(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("txn list", flag.ContinueOnError)
	states := fs.String("state", "", "only these states, comma-separated (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort)")
	o := fs.String("o", "table", "output format: table or json")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 0, "no arguments"); err != nil {
		return err
	}
	if err := checkOutput(*o); err != nil {
		return err
	}
	var filter []string
	for _, s := range strings.Split(*states, ",") {
		if s = strings.TrimSpace(s); s != "" {
			filter = append(filter, s)
		}
	}
	ls, err := env.txnsClient().List(ctx, filter...)
	if err != nil {
		return fmt.Errorf("list transactions: %w", err)
	}
	if *o == "json" {
		if ls == nil {
			ls = []txns.Description{}
		}
		return writeJSON(env, ls)
	}
	return writeTxns(env.Stdout, ls)
}

// txnDescribe prints one transactional id's state.
func txnDescribe(ctx context.Context, env Env, args []string) error {
	pos, o, err := parseOutputCommand("txn describe", args, 1, "a transactional id")
	if err != nil {
		return err
	}
	d, err := env.txnsClient().Describe(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("describe transaction %s: %w", pos[0], err)
	}
	if o == "json" {
		return writeJSON(env, d)
	}
	if err := writeTxns(env.Stdout, []txns.Description{*d}); err != nil {
		return err
	}
	if len(d.Partitions) > 0 || len(d.Groups) > 0 {
		fmt.Fprintln(env.Stdout)
		w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "IN THE TRANSACTION\t")
		for _, tp := range d.Partitions {
			fmt.Fprintf(w, "partition\t%s\n", tp)
		}
		for _, g := range d.Groups {
			fmt.Fprintf(w, "group offsets\t%s\n", g)
		}
		return w.Flush()
	}
	return nil
}

// writeTxns prints transactional ids as a table.
func writeTxns(out io.Writer, ls []txns.Description) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TRANSACTIONAL-ID\tSTATE\tPRODUCER-ID\tEPOCH\tTIMEOUT\tOPEN-SINCE\tPARTITIONS")
	for _, d := range ls {
		since := "-"
		if d.StartMs >= 0 {
			since = time.UnixMilli(d.StartMs).UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%v\t%s\t%d\n", d.ID, d.State, d.ProducerID, d.Epoch,
			time.Duration(d.TimeoutMs)*time.Millisecond, since, len(d.Partitions))
	}
	return w.Flush()
}
