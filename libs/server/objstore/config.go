package objstore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/sluicemq/sluice/libs/server/service"
)

// Config says where a storage node keeps its tiered segments. The zero
// Endpoint turns tiered storage off.
type Config struct {
	// Endpoint is the S3 server's URL, http(s)://host:port; empty: tiered
	// storage is off.
	Endpoint string
	// Bucket holds the objects; Region is the one requests are signed for.
	Bucket, Region string
	// Prefix is put in front of every key, joined with "/" unless it ends
	// in one ("" for none).
	Prefix string
	// CredentialsFile holds the access key, two lines access_key_id=... and
	// secret_access_key=...; when empty the credentials come from
	// $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY.
	CredentialsFile string
	// Timeout bounds each request to the store (each attempt of it).
	Timeout time.Duration
	// CreateBucket creates the bucket at Open when it is missing.
	CreateBucket bool
}

// DefaultConfig returns the defaults of the -remote-* flags: tiered
// storage off, bucket "sluice" in us-east-1, 30 s per request.
func DefaultConfig() Config {
	return Config{Bucket: "sluice", Region: "us-east-1", Timeout: 30 * time.Second}
}

// Register adds the object store's flags (-remote-*) to fs, with c's
// values as defaults.
func (c *Config) Register(fs *service.FlagSet) {
	fs.String(&c.Endpoint, "remote-endpoint", c.Endpoint, `URL of the S3-compatible object store of tiered storage, http(s)://host:port, e.g. http://127.0.0.1:9190 ("" turns tiered storage off)`)
	fs.String(&c.Bucket, "remote-bucket", c.Bucket, "bucket of the object store that holds the tiered segments")
	fs.String(&c.Region, "remote-region", c.Region, "region the object store's requests are signed for")
	fs.String(&c.Prefix, "remote-prefix", c.Prefix, `prefix of every object key, joined with "/" ("" for none)`)
	fs.String(&c.CredentialsFile, "remote-credentials-file", c.CredentialsFile,
		"file with the object store's credentials, two lines access_key_id=... and secret_access_key=... (default: $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY)")
	fs.Duration(&c.Timeout, "remote-timeout", c.Timeout, "time allowed for each request to the object store")
	fs.Bool(&c.CreateBucket, "remote-create-bucket", c.CreateBucket, "create the bucket at start when it is missing")
}

// Enabled reports whether tiered storage is on (an endpoint is set).
func (c Config) Enabled() bool { return c.Endpoint != "" }

// bucketName is S3's rule for bucket names (path-style addressing allows
// a few more, which not every server takes).
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// Validate checks every field of an enabled configuration, credentials
// included, and names the flag of the first bad one. A disabled one is
// valid.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	if err := validateEndpoint(c.Endpoint); err != nil {
		return fmt.Errorf("flag -remote-endpoint: %q: %w", c.Endpoint, err)
	}
	switch {
	case c.Bucket == "":
		return errors.New("flag -remote-bucket: empty (tiered storage needs a bucket)")
	case !bucketName.MatchString(c.Bucket):
		return fmt.Errorf("flag -remote-bucket: %q is not a bucket name (3 to 63 lower-case letters, digits, dots and hyphens)", c.Bucket)
	case c.Region == "":
		return errors.New("flag -remote-region: empty")
	case strings.HasPrefix(c.Prefix, "/"):
		return fmt.Errorf("flag -remote-prefix: %q must not start with /", c.Prefix)
	case c.Timeout <= 0:
		return fmt.Errorf("flag -remote-timeout: %v must be positive", c.Timeout)
	}
	_, _, err := c.credentials()
	return err
}

// validateEndpoint checks that u is http(s)://host[:port] with nothing
// after the host. The port may be left out for the scheme's own (an
// endpoint such as https://s3.us-east-1.amazonaws.com has none).
func validateEndpoint(u string) error {
	p, err := url.Parse(u)
	switch {
	case err != nil:
		return fmt.Errorf("want http(s)://host:port: %w", err)
	case p.Scheme != "http" && p.Scheme != "https":
		return errors.New("want http(s)://host:port (no http:// or https://)")
	case p.Hostname() == "":
		return errors.New("want http(s)://host:port (no host)")
	case p.User != nil || (p.Path != "" && p.Path != "/") || p.RawQuery != "" || p.Fragment != "":
		return errors.New("want http(s)://host:port with nothing after the port")
	}
	return nil
}

// Environment variables the credentials come from without
// -remote-credentials-file (the AWS tools' names).
const (
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
)

// credentials returns the access key: from CredentialsFile when set,
// else from the environment.
func (c Config) credentials() (id, secret string, err error) {
	if c.CredentialsFile == "" {
		id, secret = os.Getenv(EnvAccessKeyID), os.Getenv(EnvSecretAccessKey)
		if id == "" || secret == "" {
			return "", "", fmt.Errorf("no object store credentials: set -remote-credentials-file, or $%s and $%s", EnvAccessKeyID, EnvSecretAccessKey)
		}
		return id, secret, nil
	}
	b, err := os.ReadFile(c.CredentialsFile)
	if err != nil {
		return "", "", fmt.Errorf("flag -remote-credentials-file: %w", err)
	}
	if id, secret, err = parseCredentials(b); err != nil {
		return "", "", fmt.Errorf("flag -remote-credentials-file: %s: %w", c.CredentialsFile, err)
	}
	return id, secret, nil
}

// parseCredentials reads a credentials file: the lines access_key_id=...
// and secret_access_key=..., once each; blank lines and lines starting
// with # are skipped. Values are trimmed of surrounding blanks.
func parseCredentials(b []byte) (id, secret string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, value, ok := strings.Cut(text, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		var dst *string
		switch name {
		case "access_key_id":
			dst = &id
		case "secret_access_key":
			dst = &secret
		}
		switch {
		case !ok || dst == nil:
			return "", "", fmt.Errorf("line %d: want access_key_id=ID or secret_access_key=SECRET", line)
		case value == "":
			return "", "", fmt.Errorf("line %d: %s is empty", line, name)
		case *dst != "":
			return "", "", fmt.Errorf("line %d: %s given twice", line, name)
		}
		*dst = value
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	switch {
	case id == "":
		return "", "", errors.New("no access_key_id line")
	case secret == "":
		return "", "", errors.New("no secret_access_key line")
	}
	return id, secret, nil
}

// key returns the full key of a relative one.
func (c Config) key(k string) string { return c.keyPrefix() + k }

// keyPrefix is Prefix with its "/" separator, or "".
func (c Config) keyPrefix() string {
	if c.Prefix == "" || strings.HasSuffix(c.Prefix, "/") {
		return c.Prefix
	}
	return c.Prefix + "/"
}
