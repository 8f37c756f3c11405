package ctl

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/sluicemq/sluice/libs/cluster"
)

// quotaTarget parses --client-id ID or --default: the client a quota
// command is about ("" for the default quota).
func quotaTarget(name string, args []string, extra func(*flag.FlagSet)) (string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	id := fs.String("client-id", "", "the client id the quota is for")
	def := fs.Bool("default", false, "the default quota, for client ids without their own")
	if extra != nil {
		extra(fs)
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return "", err
	}
	if err := exactly(pos, 0, "no positional arguments"); err != nil {
		return "", err
	}
	if (*id == "") == !*def {
		return "", fmt.Errorf("%w: %s needs exactly one of --client-id ID and --default", errUsage, name)
	}
	return *id, nil
}

// quotaSet sets a client's produce and fetch byte rates.
func quotaSet(ctx context.Context, env Env, args []string) error {
	var produce, fetch *int64
	client, err := quotaTarget("quota set", args, func(fs *flag.FlagSet) {
		produce = fs.Int64("produce-bytes-per-sec", 0, "produce byte rate allowed on each frontend; 0: no limit")
		fetch = fs.Int64("fetch-bytes-per-sec", 0, "fetch byte rate allowed on each storage node and frontend; 0: no limit")
	})
	if err != nil {
		return err
	}
	if *produce < 0 || *fetch < 0 {
		return fmt.Errorf("%w: rates must not be negative (0: no limit)", errUsage)
	}
	if *produce == 0 && *fetch == 0 {
		return fmt.Errorf("%w: quota set needs --produce-bytes-per-sec and/or --fetch-bytes-per-sec (quota delete removes a quota)", errUsage)
	}
	q := cluster.Quota{ClientID: client, ProduceBytesPerSec: *produce, FetchBytesPerSec: *fetch}
	if err := env.frontendAdmin().SetQuota(ctx, q); err != nil {
		return fmt.Errorf("set quota of %s: %w", quotaName(client), err)
	}
	fmt.Fprintf(env.Stdout, "quota of %s: produce %s, fetch %s\n", quotaName(client), rate(q.ProduceBytesPerSec), rate(q.FetchBytesPerSec))
	return nil
}

// quotaDelete removes a client's quota (the default applies to it again).
func quotaDelete(ctx context.Context, env Env, args []string) error {
	client, err := quotaTarget("quota delete", args, nil)
	if err != nil {
		return err
	}
	if err := env.frontendAdmin().SetQuota(ctx, cluster.Quota{ClientID: client}); err != nil {
		return fmt.Errorf("delete quota of %s: %w", quotaName(client), err)
	}
	fmt.Fprintf(env.Stdout, "quota of %s deleted\n", quotaName(client))
	return nil
}

// quotaList prints the quotas in force.
func quotaList(ctx context.Context, env Env, args []string) error {
	_, o, err := parseOutputCommand("quota list", args, 0, "no arguments")
	if err != nil {
		return err
	}
	snap, err := env.metadataClient().Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("quota list: %w", err)
	}
	qs := snap.Quotas
	if qs == nil {
		qs = []cluster.Quota{}
	}
	if o == "json" {
		return writeJSON(env, qs)
	}
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CLIENT-ID\tPRODUCE\tFETCH")
	for _, q := range qs {
		fmt.Fprintf(w, "%s\t%s\t%s\n", quotaName(q.ClientID), rate(q.ProduceBytesPerSec), rate(q.FetchBytesPerSec))
	}
	return w.Flush()
}

func quotaName(client string) string {
	if client == "" {
		return "(default)"
	}
	return client
}

func rate(bytesPerSec int64) string {
	if bytesPerSec <= 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%d B/s", bytesPerSec)
}
