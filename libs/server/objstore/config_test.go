package objstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/server/service"
)

func TestConfigFlags(t *testing.T) {
	c := DefaultConfig()
	fs := service.NewFlagSet("x")
	c.Register(fs)
	if err := fs.Parse([]string{"-remote-endpoint", "http://127.0.0.1:9190", "-remote-prefix", "c1", "-remote-timeout", "5s", "-remote-create-bucket"}); err != nil {
		t.Fatal(err)
	}
	want := Config{Endpoint: "http://127.0.0.1:9190", Bucket: "sluice", Region: "us-east-1", Prefix: "c1", Timeout: 5 * time.Second, CreateBucket: true}
	if c != want {
		t.Fatalf("config %+v, want %+v", c, want)
	}
	if !c.Enabled() || (Config{}).Enabled() {
		t.Fatal("Enabled does not follow the endpoint")
	}
	if err := (DefaultConfig()).Validate(); err != nil {
		t.Fatalf("the default (off) is invalid: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good", "# dev\naccess_key_id = id\n\nsecret_access_key=s=cret\n")
	ok := DefaultConfig()
	ok.Endpoint, ok.CredentialsFile = "http://127.0.0.1:9190", good
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if id, secret, err := ok.credentials(); id != "id" || secret != "s=cret" || err != nil {
		t.Fatalf("credentials %q %q %v", id, secret, err)
	}
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Endpoint = "127.0.0.1:9190" }, "-remote-endpoint"},
		{func(c *Config) { c.Endpoint = "ftp://h:1" }, "http(s)://host:port"},
		{func(c *Config) { c.Endpoint = "http://:9190" }, "no host"},
		{func(c *Config) { c.Endpoint = "http://h:9190/bucket" }, "nothing after the port"},
		{func(c *Config) { c.Endpoint = "http://h:port" }, "-remote-endpoint"},
		{func(c *Config) { c.Bucket = "" }, "-remote-bucket: empty"},
		{func(c *Config) { c.Bucket = "Upper_case" }, "not a bucket name"},
		{func(c *Config) { c.Region = "" }, "-remote-region"},
		{func(c *Config) { c.Prefix = "/abs" }, "-remote-prefix"},
		{func(c *Config) { c.Timeout = 0 }, "-remote-timeout"},
		{func(c *Config) { c.CredentialsFile = filepath.Join(dir, "none") }, "no such file"},
		{func(c *Config) { c.CredentialsFile = file("junk", "access_key_id=a\nsecret=b\n") }, "line 2: want access_key_id=ID or secret_access_key=SECRET"},
		{func(c *Config) { c.CredentialsFile = file("twice", "access_key_id=a\naccess_key_id=b\n") }, "line 2: access_key_id given twice"},
		{func(c *Config) { c.CredentialsFile = file("empty", "access_key_id=\n") }, "line 1: access_key_id is empty"},
		{func(c *Config) { c.CredentialsFile = file("nosecret", "access_key_id=a\n") }, "no secret_access_key line"},
	} {
		cfg := ok
		c.change(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want it to contain %q", cfg, err, c.want)
		}
	}
}

func TestConfigCredentialsFromEnvironment(t *testing.T) {
	c := DefaultConfig()
	c.Endpoint = "https://s3.example.com"
	t.Setenv(EnvAccessKeyID, "id")
	t.Setenv(EnvSecretAccessKey, "")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "no object store credentials") {
		t.Fatalf("missing secret: %v", err)
	}
	t.Setenv(EnvSecretAccessKey, "secret")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestKeyPrefix(t *testing.T) {
	for _, c := range []struct{ prefix, want string }{{"", "k"}, {"c1", "c1/k"}, {"c1/", "c1/k"}, {"a/b", "a/b/k"}} {
		if got := (Config{Prefix: c.prefix}).key("k"); got != c.want {
			t.Errorf("prefix %q: key %q, want %q", c.prefix, got, c.want)
		}
	}
}
