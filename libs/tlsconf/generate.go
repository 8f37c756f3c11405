package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names Generate writes in its directory.
const (
	CAFile         = "ca.pem"
	CAKeyFile      = "ca-key.pem"
	NodeCertFile   = "node.pem" // server and client use: every service
	NodeKeyFile    = "node-key.pem"
	ClientCertFile = "client.pem" // client use only: tools and applications
	ClientKeyFile  = "client-key.pem"
)

// Generate writes a new certificate authority and two certificates it signs
// into dir: a node certificate for the services (server and client use; its
// names are hosts, IP addresses among them as such) and a client certificate
// for tools and applications. Keys are ECDSA P-256, valid for validity. The
// keys are written readable by the owner only.
func Generate(dir string, hosts []string, validity time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	now, until := time.Now().Add(-time.Hour), time.Now().Add(validity) // an hour back: clock skew between machines
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "Sluice development CA"},
		NotBefore: now, NotAfter: until, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writePair(dir, CAFile, CAKeyFile, caDER, caKey); err != nil {
		return err
	}
	node := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "sluice-node"},
		NotBefore: now, NotAfter: until, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			node.IPAddresses = append(node.IPAddresses, ip)
		} else {
			node.DNSNames = append(node.DNSNames, h)
		}
	}
	if err := sign(dir, NodeCertFile, NodeKeyFile, node, ca, caKey); err != nil {
		return err
	}
	client := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "sluice-client"},
		NotBefore: now, NotAfter: until, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return sign(dir, ClientCertFile, ClientKeyFile, client, ca, caKey)
}

func sign(dir, certName, keyName string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	return writePair(dir, certName, keyName, der, key)
}

func writePair(dir, certName, keyName string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, certName), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", certName, err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyName), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", keyName, err)
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // the system's random source failed: nothing can be signed
	}
	return n
}

// DefaultHosts are the names of the development clusters: the local one
// (make run) and the docker-compose services.
var DefaultHosts = []string{"localhost", "127.0.0.1", "::1",
	"metadata-1", "metadata-2", "metadata-3", "storage-1", "storage-2", "storage-3",
	"frontend-1", "frontend-2", "offsets-1", "offsets-2", "offsets-3"}

// IssueClient signs a client certificate for a user with the CA Generate
// wrote into dir: NAME.pem and NAME-key.pem, whose common name is name (the
// principal storage nodes with -authorize see).
func IssueClient(dir, name string, validity time.Duration) error {
	if name == "" || strings.ContainsAny(name, "/\\") {
		return fmt.Errorf("tls: %q cannot name a client certificate file", name)
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return fmt.Errorf("tls: %s or %s holds no PEM block", CAFile, CAKeyFile)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return err
	}
	caKey, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: now, NotAfter: time.Now().Add(validity), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return sign(dir, name+".pem", name+"-key.pem", tmpl, ca, caKey)
}
