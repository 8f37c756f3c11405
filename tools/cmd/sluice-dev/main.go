// Command sluice-dev starts a local Sluice cluster as processes on 127.0.0.1
// (an S3-compatible object store for tiered storage, three metadata voters,
// three storage nodes, a frontend and three offsets replicas), prints where
// everything is, and keeps it running as
// docker-compose would: a process that exits on its own is reported and
// started again after a back-off while the rest keeps serving. Ctrl-C stops
// it all cleanly. Data stays in the data directory between runs. `make run`
// runs it.
//
// While it runs, the same command controls it through a socket in the data
// directory:
//
//	sluice-dev status                  every process: pid, state, restarts, last exit
//	sluice-dev kill storage-2          SIGKILL, as a crash; stays down until start
//	sluice-dev stop storage-2          SIGTERM; stays down until start
//	sluice-dev start storage-2         start again and wait until it is ready
//	sluice-dev restart storage-2       stop, then start
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/server/version"
)

const usage = `usage:
  sluice-dev [flags]                      start a local cluster (make run)
  sluice-dev [-data DIR] status [-o json] the running cluster's processes
  sluice-dev [-data DIR] kill|stop|start|restart NAME
                                          control one process (NAME as in status: storage-2, metadata-1, frontend, offsets-3, objectstore)
flags:
`

func main() {
	fs := flag.NewFlagSet("sluice-dev", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage); fs.PrintDefaults() }
	bin := fs.String("bin", "./bin", "directory holding the service binaries")
	data := fs.String("data", "./data", "data directory (kept between runs); the control socket is in it")
	storage := fs.Int("storage", 3, "number of storage nodes")
	voters := fs.Int("voters", 3, "number of metadata voters: 1 or 3")
	freePorts := fs.Bool("free-ports", false, "listen on free ports instead of make run's fixed ones (printed at start)")
	objectStore := fs.Bool("object-store", true, "start an S3-compatible object store (versitygw from -bin) for tiered storage and point the storage nodes at it")
	showVersion := fs.Bool("version", false, "print the version, the commit and the Go version, and exit")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *showVersion {
		fmt.Println(version.String("sluice-dev"))
		return
	}
	if fs.NArg() > 0 {
		os.Exit(control(os.Stdout, os.Stderr, socketPath(*data), fs.Args()))
	}
	if *voters != 1 && *voters != 3 {
		fmt.Fprintln(os.Stderr, "sluice-dev: flag -voters: must be 1 or 3")
		os.Exit(2)
	}
	if *storage < 1 || *storage > 9 {
		fmt.Fprintln(os.Stderr, "sluice-dev: flag -storage: must be between 1 and 9")
		os.Exit(2)
	}
	if err := run(*bin, *data, *storage, *voters, *freePorts, *objectStore); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-dev:", err)
		os.Exit(1)
	}
}

// socketPath is the control socket of the cluster whose data is in dir.
func socketPath(dir string) string { return filepath.Join(dir, "sluice-dev.sock") }

// run starts the cluster and supervises it until Ctrl-C or SIGTERM.
func run(bin, data string, storage, voters int, freePorts, objectStore bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ports := localcluster.DefaultPorts()
	if freePorts {
		var err error
		if ports, err = localcluster.FreePorts(storage); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	// One launcher per data directory: a second would fight the first for
	// the same files and ports.
	ctl, err := listenControl(socketPath(data))
	if err != nil {
		return err
	}
	c, err := localcluster.New(localcluster.Config{BinDir: bin, DataDir: data, Storage: storage, Voters: voters, Ports: ports, Log: os.Stdout,
		ObjectStore: objectStore})
	if err != nil {
		ctl.Close()
		return err
	}
	if err := c.Start(ctx); err != nil {
		ctl.Close()
		return err
	}
	sup := c.Supervise(os.Stdout)
	ctl.serve(ctx, c, sup)
	printBanner(os.Stdout, c, data, storage)
	<-ctx.Done()
	fmt.Println("\nstopping...")
	ctl.Close()
	sup.Close()
	c.Stop()
	return nil
}

func printBanner(w io.Writer, c *localcluster.Cluster, data string, storage int) {
	p := c.Ports()
	store := ""
	if u := c.ObjectStoreURL(); u != "" {
		store = fmt.Sprintf("\n  objects    %s   (S3 for tiered storage: bucket %s, access key %s, secret %s; files in %s)",
			u, localcluster.ObjectStoreBucket, localcluster.ObjectStoreAccessKey, localcluster.ObjectStoreSecretKey, c.ObjectStoreDir())
	}
	fmt.Fprintf(w, `
Sluice is running (data in %s, logs in %s/logs):
  frontend   %s   (produce, admin; metrics on 127.0.0.1:%d)
  kafka      %s   (bootstrap servers for Kafka clients: kcat -b %s -L)
  metadata   %s   (Raft voters)
  offsets    %s   (Raft replicas: consumer groups and offsets)
  storage    127.0.0.1:%d..%d%s
Try it:
  ./bin/sluicectl topic create demo --partitions 3 && printf 'k1:hello\nk2:world\n' | ./bin/sluicectl produce demo --key-separator :
  ./bin/sluicectl consume demo --from-beginning --exit-at-end --format '%%p/%%o %%k=%%s\n'
  ./bin/sluicectl consume demo --group readers --from-beginning --exit-at-end && ./bin/sluicectl group describe readers
A process that exits is restarted; ./bin/sluice-dev status|kill|stop|start|restart NAME controls them.
Ctrl-C stops the cluster.
`, data, data, c.FrontendURL(), p.FrontendAdmin, c.KafkaAddrs()[0], c.KafkaAddrs()[0], c.MetadataURL(), c.OffsetsURL(), p.StorageBase, p.StorageBase+storage-1, store)
}
