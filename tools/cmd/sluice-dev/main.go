// Command sluice-dev starts a local Sluice cluster as processes on 127.0.0.1
// (three metadata voters, three storage nodes, a frontend and an offsets service),
// prints where everything is, and stops it all cleanly on Ctrl-C. Data stays in
// the data directory between runs. `make run` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicemq/sluice/libs/localcluster"
)

func main() {
	bin := flag.String("bin", "./bin", "directory holding the service binaries")
	data := flag.String("data", "./data", "data directory (kept between runs)")
	storage := flag.Int("storage", 3, "number of storage nodes")
	voters := flag.Int("voters", 3, "number of metadata voters: 1 or 3")
	flag.Parse()
	if *voters != 1 && *voters != 3 {
		fmt.Fprintln(os.Stderr, "sluice-dev: flag -voters: must be 1 or 3")
		os.Exit(2)
	}
	if *storage < 1 || *storage > 9 {
		fmt.Fprintln(os.Stderr, "sluice-dev: flag -storage: must be between 1 and 9")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := localcluster.New(localcluster.Config{BinDir: *bin, DataDir: *data, Storage: *storage, Voters: *voters, Log: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice-dev:", err)
		os.Exit(1)
	}
	if err := c.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-dev:", err)
		os.Exit(1)
	}
	p := localcluster.DefaultPorts()
	fmt.Printf(`
Sluice is running (data in %s, logs in %s/logs):
  frontend   %s   (produce, admin; metrics on 127.0.0.1:%d)
  kafka      %s   (bootstrap servers for Kafka clients: kcat -b %s -L)
  metadata   %s   (Raft voters)
  offsets    %s   (Raft replicas: consumer groups and offsets)
  storage    127.0.0.1:%d..%d
Try it:
  ./bin/sluicectl topic create demo --partitions 3 && printf 'k1:hello\nk2:world\n' | ./bin/sluicectl produce demo --key-separator :
  ./bin/sluicectl consume demo --from-beginning --exit-at-end --format '%%p/%%o %%k=%%s\n'
  ./bin/sluicectl consume demo --group readers --from-beginning --exit-at-end && ./bin/sluicectl group describe readers
Ctrl-C stops the cluster.
`, *data, *data, c.FrontendURL(), p.FrontendAdmin, c.KafkaAddrs()[0], c.KafkaAddrs()[0], c.MetadataURL(), c.OffsetsURL(), p.StorageBase, p.StorageBase+*storage-1)
	exited := c.Exited()
	select {
	case <-ctx.Done():
		fmt.Println("\nstopping...")
	case name := <-exited:
		fmt.Fprintf(os.Stderr, "sluice-dev: %s exited unexpectedly; stopping the cluster\n", name)
	}
	c.Stop()
}
