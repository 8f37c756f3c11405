package ctl

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/sluicemq/sluice/libs/cluster"
)

// ClusterSetting is one row of `cluster config -o json`.
type ClusterSetting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Default is true when the setting was never set (or was deleted).
	Default bool `json:"default"`
}

// clusterConfig shows the cluster-wide settings, after setting (--set
// k=v) and deleting (--delete k, back to the default) any given. Metadata
// takes the change; every service sees it at once.
func clusterConfig(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("cluster config", flag.ContinueOnError)
	set := kvFlags{}
	var del listFlag
	fs.Var(set, "set", "cluster setting key=value (repeatable)")
	fs.Var(&del, "delete", "cluster setting to return to its default (repeatable)")
	o := fs.String("o", "table", "output format: table or json")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 0, "no arguments (--set k=v, --delete k)"); err != nil {
		return err
	}
	if err := checkOutput(*o); err != nil {
		return err
	}
	meta := env.metadataClient()
	var config map[string]string
	if len(set) > 0 || len(del) > 0 {
		if config, err = meta.SetClusterConfig(ctx, cluster.AlterTopicConfigRequest{Set: set, Delete: del}); err != nil {
			return fmt.Errorf("cluster config: %w", err)
		}
	} else {
		snap, err := meta.Snapshot(ctx)
		if err != nil {
			return fmt.Errorf("cluster config: %w", err)
		}
		config = snap.Config
	}
	defaults := cluster.ClusterSettingDefaults()
	rows := []ClusterSetting{}
	for _, name := range cluster.ClusterSettings() {
		v, ok := config[name]
		if !ok {
			v = defaults[name]
		}
		rows = append(rows, ClusterSetting{Name: name, Value: v, Default: !ok})
	}
	if *o == "json" {
		return writeJSON(env, rows)
	}
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SETTING\tVALUE\tSOURCE")
	for _, r := range rows {
		src := "set"
		if r.Default {
			src = "default"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", r.Name, r.Value, src)
	}
	return w.Flush()
}
