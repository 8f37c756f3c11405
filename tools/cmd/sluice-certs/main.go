// Command sluice-certs writes a development certificate authority and the
// certificates it signs (make certs): node.pem for every service (server and
// client use, named for the local and docker-compose clusters) and
// client.pem for tools and applications. Never use them in production.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicemq/sluice/libs/server/version"
	"github.com/sluicemq/sluice/libs/tlsconf"
)

func main() {
	dir := flag.String("dir", "certs", "directory to write the PEM files to")
	hosts := flag.String("hosts", strings.Join(tlsconf.DefaultHosts, ","), "names and IP addresses of the node certificate, comma-separated")
	validity := flag.Duration("validity", 365*24*time.Hour, "how long the certificates are valid")
	client := flag.String("client", "", "instead, sign a client certificate for this user (NAME.pem, NAME-key.pem) with the CA in -dir")
	showVersion := flag.Bool("version", false, "print the version, the commit and the Go version, and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.String("sluice-certs"))
		return
	}
	if flag.NArg() > 0 || *validity <= 0 {
		fmt.Fprintln(os.Stderr, "usage: sluice-certs [-dir DIR] [-hosts h1,h2] [-validity DURATION] [-client NAME]")
		os.Exit(2)
	}
	if *client != "" {
		if err := tlsconf.IssueClient(*dir, *client, *validity); err != nil {
			fmt.Fprintf(os.Stderr, "sluice-certs: %v\n", err)
			os.Exit(1)
		}
		fmt.Println(filepath.Join(*dir, *client+".pem"))
		fmt.Println(filepath.Join(*dir, *client+"-key.pem"))
		return
	}
	if err := tlsconf.Generate(*dir, strings.Split(*hosts, ","), *validity); err != nil {
		fmt.Fprintf(os.Stderr, "sluice-certs: %v\n", err)
		os.Exit(1)
	}
	for _, f := range []string{tlsconf.CAFile, tlsconf.NodeCertFile, tlsconf.NodeKeyFile, tlsconf.ClientCertFile, tlsconf.ClientKeyFile} {
		fmt.Println(filepath.Join(*dir, f))
	}
}
