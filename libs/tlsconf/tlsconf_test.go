package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGeneratedCertificatesWork: the generated node certificate serves and
// is verified against the CA; with the CA set the server requires a client
// certificate (mutual TLS): the client certificate passes, none is refused.
func TestGeneratedCertificatesWork(t *testing.T) {
	dir := t.TempDir()
	if err := Generate(dir, []string{"localhost", "127.0.0.1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	f := Files{CertFile: filepath.Join(dir, NodeCertFile), KeyFile: filepath.Join(dir, NodeKeyFile), CAFile: filepath.Join(dir, CAFile)}
	server, client, err := f.Load()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = c.Write([]byte("ok")); _ = c.(*tls.Conn).Handshake() }()
		}
	}()
	dial := func(cfg *tls.Config) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = io.ReadAll(c)
		return err
	}
	if err := dial(client); err != nil {
		t.Fatalf("node identity: %v", err)
	}
	app, err := ClientFiles(f.CAFile, filepath.Join(dir, ClientCertFile), filepath.Join(dir, ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(app); err != nil {
		t.Fatalf("client certificate: %v", err)
	}
	anon, err := ClientFiles(f.CAFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(anon); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client without a certificate got in: %v", err)
	}
	if err := dial(&tls.Config{MinVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("a client that does not trust the CA connected")
	}
}

func TestFilesValidate(t *testing.T) {
	for _, f := range []Files{{CertFile: "c"}, {KeyFile: "k"}, {CAFile: "ca"}} {
		if err := f.Validate(); err == nil {
			t.Errorf("%+v validated", f)
		}
	}
	if s, c, err := (Files{}).Load(); s != nil || c != nil || err != nil {
		t.Fatalf("no files: %v %v %v", s, c, err)
	}
	if _, _, err := (Files{CertFile: "/nope", KeyFile: "/nope"}).Load(); err == nil {
		t.Fatal("missing files loaded")
	}
}

func TestIssueClient(t *testing.T) {
	dir := t.TempDir()
	if err := Generate(dir, []string{"127.0.0.1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := IssueClient(dir, "alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	cfg, err := ClientFiles(filepath.Join(dir, CAFile), filepath.Join(dir, "alice.pem"), filepath.Join(dir, "alice-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil || leaf.Subject.CommonName != "alice" {
		t.Fatalf("issued %v, %v", leaf.Subject, err)
	}
	if err := IssueClient(dir, "../x", time.Hour); err == nil {
		t.Fatal("a name with a path was accepted")
	}
}
