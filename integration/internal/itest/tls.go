package itest

import (
	"crypto/tls"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/tlsconf"
)

// StartTLSCluster writes a CA and certificates as make certs does and starts
// a cluster whose services all use them, with more flags per service in
// extra ("metadata", "storage", "frontend", "offsets"). It returns the
// certificates' directory and a client configuration that trusts the CA and
// has no certificate of its own.
func StartTLSCluster(t *testing.T, extra map[string][]string) (*localcluster.Cluster, string, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	if err := tlsconf.Generate(dir, tlsconf.DefaultHosts, time.Hour); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, tlsconf.CAFile)
	node := []string{"-tls-cert", filepath.Join(dir, tlsconf.NodeCertFile), "-tls-key", filepath.Join(dir, tlsconf.NodeKeyFile), "-tls-ca", ca}
	flags := map[string][]string{}
	for _, svc := range []string{"metadata", "storage", "frontend", "offsets"} {
		flags[svc] = append(slices.Clone(node), extra[svc]...)
	}
	c := StartClusterConfig(t, localcluster.Config{Storage: 3, TLS: true, Extra: flags})
	caOnly, err := tlsconf.ClientFiles(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return c, dir, caOnly
}
