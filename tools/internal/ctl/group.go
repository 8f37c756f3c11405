package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicemq/sluice/libs/groups"
)

// The group commands talk to the offsets service (--offsets).

func offsetsClient(env Env) *groups.Client { return env.groupsClient() }

func groupList(ctx context.Context, env Env, args []string) error {
	_, o, err := parseOutputCommand("group list", args, 0, "no arguments")
	if err != nil {
		return err
	}
	ls, err := offsetsClient(env).List(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].Group < ls[j].Group })
	if o == "json" {
		if ls == nil {
			ls = []groups.Listing{}
		}
		return writeJSON(env, ls)
	}
	return writeGroupList(env.Stdout, ls)
}

// writeGroupList prints `group list` as a table.
func writeGroupList(out io.Writer, ls []groups.Listing) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "GROUP\tPROTOCOL\tSTATE\tMEMBERS")
	for _, l := range ls {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", l.Group, groups.ProtocolLabel(l.Protocol, l.ProtocolType), l.State, l.Members)
	}
	return w.Flush()
}

func groupDescribe(ctx context.Context, env Env, args []string) error {
	pos, o, err := parseOutputCommand("group describe", args, 1, "a group id")
	if err != nil {
		return err
	}
	d, err := offsetsClient(env).Describe(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("describe group %s: %w", pos[0], err)
	}
	sortDescription(d)
	if o == "json" {
		return writeJSON(env, d)
	}
	return writeGroupDescription(env.Stdout, d)
}

// sortDescription orders members by id and partitions by topic and number,
// and turns nil lists into empty ones (so JSON shows [] rather than null).
func sortDescription(d *groups.Description) {
	if d.Members == nil {
		d.Members = []groups.MemberDescription{}
	}
	if d.Partitions == nil {
		d.Partitions = []groups.PartitionLag{}
	}
	sort.Slice(d.Members, func(i, j int) bool { return d.Members[i].MemberID < d.Members[j].MemberID })
	sort.Slice(d.Partitions, func(i, j int) bool {
		a, b := d.Partitions[i], d.Partitions[j]
		return groups.TP{Topic: a.Topic, Partition: a.Partition}.Less(groups.TP{Topic: b.Topic, Partition: b.Partition})
	})
}

// writeGroupDescription prints `group describe` like kafka-consumer-groups.sh:
// a header, the partitions with their offsets, lag and owner, the members,
// and the total lag. Unknown numbers print as "-".
func writeGroupDescription(out io.Writer, d *groups.Description) error {
	assignor := d.Assignor
	if d.Protocol == groups.ProtocolClassic {
		assignor = d.ProtocolName // the members' own assignor, run by the group's leader
	}
	fmt.Fprintf(out, "Group: %s  Protocol: %s  State: %s  Epoch: %d  Assignor: %s  Isolation: %s  Members: %d\n\n",
		d.Group, groups.ProtocolLabel(d.Protocol, d.ProtocolType), d.State, d.GroupEpoch, orDash(assignor), orDash(d.Isolation), len(d.Members))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAST-STABLE-OFFSET\tLAG\tOWNER")
	var errs []string
	for _, p := range d.Partitions {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, num(p.Committed), num(p.LogEnd), num(p.LastStable), num(p.Lag), orDash(p.Owner))
		if p.Error != "" {
			errs = append(errs, fmt.Sprintf("  %s-%d: %s", p.Topic, p.Partition, p.Error))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(errs) > 0 {
		fmt.Fprintf(out, "\nErrors:\n%s\n", strings.Join(errs, "\n"))
	}
	fmt.Fprintln(out)
	if len(d.Members) == 0 {
		fmt.Fprintf(out, "Group %s has no active members.\n", d.Group)
	} else {
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "MEMBER\tCLIENT-ID\tHOST\tINSTANCE\tEPOCH\tTOPICS\tASSIGNMENT\tREVOKING")
		for _, m := range d.Members {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", m.MemberID, orDash(m.ClientID), orDash(m.ClientHost), orDash(m.InstanceID), m.MemberEpoch,
				orDash(strings.Join(m.Topics, ",")), formatTPs(m.Assignment), formatTPs(m.Revoking))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(out, "\nTotal lag: %d\n", d.TotalLag)
	return err
}

// formatTPs prints partitions as "orders:0,1 payments:3", "-" when none.
func formatTPs(tps []groups.TopicPartitions) string {
	var parts []string
	for _, t := range groups.Group(groups.Flatten(tps)) {
		parts = append(parts, t.Topic+":"+ids(t.Partitions))
	}
	return orDash(strings.Join(parts, " "))
}

func num(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// resetCommand is a parsed `group reset-offsets`.
type resetCommand struct {
	group  string
	req    groups.ResetRequest
	output string
}

// parseResetArgs parses `group reset-offsets G --topic T [--partitions 0,1]
// --to-earliest|--to-latest|--to-datetime RFC3339|--to-offset N [--dry-run]
// [-o json]`.
func parseResetArgs(args []string) (resetCommand, error) {
	fs := flag.NewFlagSet("group reset-offsets", flag.ContinueOnError)
	topic := fs.String("topic", "", "the topic whose offsets to reset")
	parts := fs.String("partitions", "", "comma-separated partitions (default: every partition)")
	earliest := fs.Bool("to-earliest", false, "reset to each partition's earliest offset")
	latest := fs.Bool("to-latest", false, "reset to each partition's end")
	datetime := fs.String("to-datetime", "", "reset to the first offset at or after this RFC 3339 time")
	offset := fs.Int64("to-offset", 0, "reset to this offset")
	dry := fs.Bool("dry-run", false, "show the new offsets without committing them")
	o := fs.String("o", "table", "output format: table or json")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return resetCommand{}, err
	}
	if err := exactly(pos, 1, "a group id"); err != nil {
		return resetCommand{}, err
	}
	if err := groups.ValidateGroupID(pos[0]); err != nil {
		return resetCommand{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	if *topic == "" {
		return resetCommand{}, fmt.Errorf("%w: --topic is required", errUsage)
	}
	if err := checkOutput(*o); err != nil {
		return resetCommand{}, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cmd := resetCommand{group: pos[0], output: *o, req: groups.ResetRequest{Topic: *topic, DryRun: *dry}}
	targets := 0
	if *earliest {
		targets++
		cmd.req.To = groups.ResetEarliest
	}
	if *latest {
		targets++
		cmd.req.To = groups.ResetLatest
	}
	if set["to-datetime"] {
		targets++
		t, err := time.Parse(time.RFC3339, *datetime)
		if err != nil {
			return resetCommand{}, fmt.Errorf("%w: --to-datetime %q is not an RFC 3339 time (like 2024-05-01T12:00:00Z)", errUsage, *datetime)
		}
		cmd.req.To, cmd.req.TimestampMs = groups.ResetTimestamp, t.UnixMilli()
	}
	if set["to-offset"] {
		targets++
		if *offset < 0 {
			return resetCommand{}, fmt.Errorf("%w: --to-offset %d is negative", errUsage, *offset)
		}
		cmd.req.To, cmd.req.Offset = groups.ResetOffset, *offset
	}
	if targets != 1 {
		return resetCommand{}, fmt.Errorf("%w: give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset", errUsage)
	}
	if cmd.req.Partitions, err = parsePartitions(*parts); err != nil {
		return resetCommand{}, err
	}
	return cmd, nil
}

// parsePartitions parses "0,1,2" (nil for "").
func parsePartitions(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: --partitions %q: %q is not a partition number", errUsage, s, f)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

func groupResetOffsets(ctx context.Context, env Env, args []string) error {
	cmd, err := parseResetArgs(args)
	if err != nil {
		return err
	}
	offs, err := offsetsClient(env).ResetOffsets(ctx, cmd.group, cmd.req)
	if err != nil {
		return fmt.Errorf("reset offsets of group %s: %w", cmd.group, err)
	}
	sort.Slice(offs, func(i, j int) bool {
		return groups.TP{Topic: offs[i].Topic, Partition: offs[i].Partition}.Less(groups.TP{Topic: offs[j].Topic, Partition: offs[j].Partition})
	})
	if cmd.output == "json" {
		if offs == nil {
			offs = []groups.Committed{}
		}
		return writeJSON(env, groups.ResetResponse{Offsets: offs})
	}
	return writeResetResult(env.Stdout, cmd, offs)
}

// writeResetResult prints the new offsets of `group reset-offsets`.
func writeResetResult(out io.Writer, cmd resetCommand, offs []groups.Committed) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tNEW-OFFSET")
	for _, o := range offs {
		fmt.Fprintf(w, "%s\t%d\t%d\n", o.Topic, o.Partition, o.Offset)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if cmd.req.DryRun {
		_, err := fmt.Fprintf(out, "dry run: the offsets of group %s were not changed\n", cmd.group)
		return err
	}
	return nil
}

func groupDelete(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("group delete", flag.ContinueOnError)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "a group id"); err != nil {
		return err
	}
	if err := offsetsClient(env).Delete(ctx, pos[0]); err != nil {
		return fmt.Errorf("delete group %s: %w", pos[0], err)
	}
	fmt.Fprintf(env.Stdout, "deleted group %s\n", pos[0])
	return nil
}
