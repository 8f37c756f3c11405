package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/shares"
)

// The share-group commands talk to the offsets service (--offsets).

func shareList(ctx context.Context, env Env, args []string) error {
	_, o, err := parseOutputCommand("share-group list", args, 0, "no arguments")
	if err != nil {
		return err
	}
	ls, err := env.sharesClient().List(ctx)
	if err != nil {
		return fmt.Errorf("list share groups: %w", err)
	}
	if o == "json" {
		return writeJSON(env, ls)
	}
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "GROUP\tTOPICS\tMEMBERS")
	for _, l := range ls {
		fmt.Fprintf(w, "%s\t%d\t%d\n", l.Group, l.Topics, l.Members)
	}
	return w.Flush()
}

func shareDescribe(ctx context.Context, env Env, args []string) error {
	pos, o, err := parseOutputCommand("share-group describe", args, 1, "a share group id")
	if err != nil {
		return err
	}
	d, err := env.sharesClient().Describe(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("describe share group %s: %w", pos[0], err)
	}
	if o == "json" {
		return writeJSON(env, d)
	}
	return writeShareDescription(env.Stdout, d)
}

// writeShareDescription prints `share-group describe`: the configuration,
// then per partition the start and end offsets, the high watermark, lag,
// records under lock and waiting, and the running totals.
func writeShareDescription(out io.Writer, d *shares.Description) error {
	keys := make([]string, 0, len(d.Config))
	for k, v := range d.Config {
		if v != "" {
			keys = append(keys, k+"="+v)
		}
	}
	sort.Strings(keys)
	fmt.Fprintf(out, "Share group: %s  Members: %d\nConfig: %s\n\n", d.Group, len(d.Members), strings.Join(keys, " "))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tSTART-OFFSET\tEND-OFFSET\tLOG-END-OFFSET\tLAG\tACQUIRED\tAVAILABLE\tACCEPTED\tARCHIVED\tDELIVERIES")
	var lag int64
	for _, p := range d.Partitions {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", p.Topic, p.Partition, p.StartOffset, p.EndOffset, num(p.HighWatermark), p.Lag,
			p.Acquired, p.Available, p.Accepted, p.Archived, p.Deliveries)
		lag += p.Lag
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(d.Members) > 0 {
		fmt.Fprintf(out, "\nMembers holding records: %s\n", strings.Join(d.Members, ", "))
	}
	_, err := fmt.Fprintf(out, "\nTotal lag: %d\n", lag)
	return err
}

func shareResetOffsets(ctx context.Context, env Env, args []string) error {
	cmd, err := parseResetArgs(args)
	if err != nil {
		return err
	}
	offs, err := env.sharesClient().Reset(ctx, cmd.group, cmd.req)
	if err != nil {
		return fmt.Errorf("reset share group %s: %w", cmd.group, err)
	}
	if cmd.output == "json" {
		return writeJSON(env, groups.ResetResponse{Offsets: offs})
	}
	return writeResetResult(env.Stdout, cmd, offs)
}

func shareDelete(ctx context.Context, env Env, args []string) error {
	pos, err := parseArgs(flag.NewFlagSet("share-group delete", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "a share group id"); err != nil {
		return err
	}
	if err := env.sharesClient().Delete(ctx, pos[0]); err != nil {
		return fmt.Errorf("delete share group %s: %w", pos[0], err)
	}
	fmt.Fprintf(env.Stdout, "deleted share group %s\n", pos[0])
	return nil
}

// shareConfig sets configuration values: `share-group config G k=v ...`.
func shareConfig(ctx context.Context, env Env, args []string) error {
	pos, err := parseArgs(flag.NewFlagSet("share-group config", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return fmt.Errorf("%w: want a share group id and key=value settings", errUsage)
	}
	set := map[string]string{}
	for _, kv := range pos[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%w: %q is not key=value", errUsage, kv)
		}
		set[k] = v
	}
	if err := env.sharesClient().Configure(ctx, pos[0], set); err != nil {
		return fmt.Errorf("configure share group %s: %w", pos[0], err)
	}
	fmt.Fprintf(env.Stdout, "configured share group %s\n", pos[0])
	return nil
}
