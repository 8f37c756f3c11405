package service

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// HealthCheckCommand is the subcommand every binary answers for container
// health checks (images are FROM scratch: there is no shell or curl).
const HealthCheckCommand = "healthcheck"

// HealthCheck asks the process's own admin listener for /readyz (or -path)
// and returns the exit status: 0 when it answers 200, 1 otherwise (with the
// reason on stderr), 2 for bad flags. The address is -addr, else
// $SLUICE_ADMIN_ADDR (the admin listener's flag fallback), with a wildcard
// host replaced by 127.0.0.1.
func HealthCheck(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(HealthCheckCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", os.Getenv("SLUICE_ADMIN_ADDR"), "admin listener address (default $SLUICE_ADMIN_ADDR)")
	path := fs.String("path", "/readyz", "path to ask: /readyz or /healthz")
	timeout := fs.Duration("timeout", 3*time.Second, "time allowed for the answer")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *addr == "" {
		fmt.Fprintln(stderr, "healthcheck: no admin address: set -addr or SLUICE_ADMIN_ADDR")
		return 2
	}
	host := *addr
	if strings.HasPrefix(host, ":") || strings.HasPrefix(host, "0.0.0.0:") || strings.HasPrefix(host, "[::]:") {
		host = "127.0.0.1:" + host[strings.LastIndexByte(host, ':')+1:]
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+*path, nil)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "healthcheck: %s answered %d: %s\n", *path, resp.StatusCode, strings.TrimSpace(string(body)))
		return 1
	}
	return 0
}
