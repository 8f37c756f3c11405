package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/server/objstore"
)

// objstoreConfig is the configuration of a client of the object store at
// endpoint, with the development credentials in a file of dir (the secret
// given).
func objstoreConfig(t *testing.T, endpoint, secret, prefix string) objstore.Config {
	t.Helper()
	creds := filepath.Join(t.TempDir(), "credentials")
	text := fmt.Sprintf("access_key_id=%s\nsecret_access_key=%s\n", localcluster.ObjectStoreAccessKey, secret)
	if err := os.WriteFile(creds, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c := objstore.DefaultConfig()
	c.Endpoint, c.Bucket, c.Prefix, c.CredentialsFile, c.Timeout = endpoint, localcluster.ObjectStoreBucket, prefix, creds, 5*time.Second
	return c
}

// TestObjectStore: the S3 client of tiered storage against the object
// store a local cluster runs (versitygw): Open creates the bucket; Put
// (a 3 MiB object signed over plain HTTP, an overwrite), GetRange inside,
// at the end, to the end and past it, List by prefix with the configured
// prefix taken off, two prefixes sharing the bucket without seeing each
// other, Delete of present and missing keys, ErrNotFound.
func TestObjectStore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	endpoint := itest.StartObjectStore(t)
	cfg := objstoreConfig(t, endpoint, localcluster.ObjectStoreSecretKey, "cluster-a")
	cfg.CreateBucket = true
	s, err := objstore.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}

	big := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	put := func(st objstore.Store, key string, b []byte) {
		t.Helper()
		if err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	put(s, "t/0/00000000000000000000.seg", big)
	put(s, "t/0/00000000000000001000.seg", []byte("old"))
	put(s, "t/0/00000000000000001000.seg", []byte("0123456789")) // overwrites
	put(s, "t/1/00000000000000000000.seg", nil)
	put(s, "u/0/00000000000000000000.seg", []byte("other topic"))

	seg := "t/0/00000000000000001000.seg"
	for _, c := range []struct {
		key    string
		off, n int64
		want   []byte
		err    error
	}{
		{seg, 0, 10, []byte("0123456789"), nil},
		{seg, 3, 4, []byte("3456"), nil},
		{seg, 7, 3, []byte("789"), nil},   // up to the end
		{seg, 6, -1, []byte("6789"), nil}, // to the end
		{seg, 10, -1, []byte{}, nil},      // at the end
		{seg, 4, 0, []byte{}, nil},
		{seg, 8, 5, nil, io.ErrUnexpectedEOF},   // past the end
		{seg, 10, 1, nil, io.ErrUnexpectedEOF},  // at the end
		{seg, 11, -1, nil, io.ErrUnexpectedEOF}, // starts past the end
		{seg, 11, 0, nil, io.ErrUnexpectedEOF},
		{"t/1/00000000000000000000.seg", 0, -1, []byte{}, nil}, // empty object
		{"t/0/00000000000000000000.seg", 1 << 20, 1 << 20, big[1<<20 : 2<<20], nil},
		{"t/0/00000000000000000000.seg", 0, -1, big, nil},
		{"t/9/missing.seg", 0, 1, nil, objstore.ErrNotFound},
		{"t/9/missing.seg", 0, -1, nil, objstore.ErrNotFound},
	} {
		got, err := s.GetRange(ctx, c.key, c.off, c.n)
		if !errors.Is(err, c.err) || (c.err == nil && !bytes.Equal(got, c.want)) {
			t.Errorf("GetRange(%s, %d, %d) = %d bytes, %v; want %d bytes, %v", c.key, c.off, c.n, len(got), err, len(c.want), c.err)
		}
		if err != nil && !strings.Contains(err.Error(), c.key) {
			t.Errorf("error %q does not name the key %s", err, c.key)
		}
	}

	// A second client with another prefix shares the bucket (it exists:
	// no CreateBucket) and sees only its own objects.
	other, err := objstore.Open(ctx, objstoreConfig(t, endpoint, localcluster.ObjectStoreSecretKey, "cluster-b/"))
	if err != nil {
		t.Fatal(err)
	}
	put(other, "t/0/00000000000000000000.seg", []byte("b's"))
	list := func(st objstore.Store, prefix string) string {
		t.Helper()
		objs, err := st.List(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			if o.Modified.IsZero() || time.Since(o.Modified) > time.Hour {
				t.Errorf("object %s modified %v", o.Key, o.Modified)
			}
			out = append(out, fmt.Sprintf("%s=%d", o.Key, o.Size))
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		st           objstore.Store
		prefix, want string
	}{
		{s, "t/", "t/0/00000000000000000000.seg=3145728 t/0/00000000000000001000.seg=10 t/1/00000000000000000000.seg=0"},
		{s, "t/0/", "t/0/00000000000000000000.seg=3145728 t/0/00000000000000001000.seg=10"},
		{s, "", "t/0/00000000000000000000.seg=3145728 t/0/00000000000000001000.seg=10 t/1/00000000000000000000.seg=0 u/0/00000000000000000000.seg=11"},
		{s, "v/", ""},
		{other, "", "t/0/00000000000000000000.seg=3"},
	} {
		if got := list(c.st, c.prefix); got != c.want {
			t.Errorf("List(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}

	if err := s.Delete(ctx, "t/0/00000000000000000000.seg", "t/9/missing.seg", "u/0/00000000000000000000.seg"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "t/9/missing.seg"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	if got, want := list(s, ""), "t/0/00000000000000001000.seg=10 t/1/00000000000000000000.seg=0"; got != want {
		t.Errorf("after Delete: List = %q, want %q", got, want)
	}
	if _, err := s.GetRange(ctx, "u/0/00000000000000000000.seg", 0, 1); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("GetRange of a deleted key: %v", err)
	}
	if got := list(other, ""); got != "t/0/00000000000000000000.seg=3" {
		t.Errorf("the other prefix after Delete: %q", got)
	}
}

// TestObjectStoreRefusals: Open fails at once, with an error saying why,
// on a wrong secret and on a missing bucket without
// -remote-create-bucket; and within the timeout and its few retries on a
// store that is down or does not answer.
func TestObjectStoreRefusals(t *testing.T) {
	t.Parallel()
	endpoint := itest.StartObjectStore(t)
	ctx := context.Background()
	open := func(cfg objstore.Config) (time.Duration, error) {
		start := time.Now()
		s, err := objstore.Open(ctx, cfg)
		if err == nil {
			t.Fatalf("Open(%+v) = %v, nil", cfg, s)
		}
		return time.Since(start), err
	}

	bad := objstoreConfig(t, endpoint, "not-the-secret", "")
	bad.CreateBucket = true
	took, err := open(bad)
	if !strings.Contains(err.Error(), "access denied, check the credentials") || took > 5*time.Second {
		t.Errorf("a wrong secret: after %v: %v", took, err)
	}
	t.Logf("a wrong secret: %v", err)

	took, err = open(objstoreConfig(t, endpoint, localcluster.ObjectStoreSecretKey, ""))
	if !strings.Contains(err.Error(), `bucket "sluice"`) || !strings.Contains(err.Error(), "-remote-create-bucket") || took > 5*time.Second {
		t.Errorf("a missing bucket: after %v: %v", took, err)
	}
	t.Logf("a missing bucket: %v", err)

	// Once a good client made the bucket, the wrong secret still fails.
	good := objstoreConfig(t, endpoint, localcluster.ObjectStoreSecretKey, "")
	good.CreateBucket = true
	if _, err := objstore.Open(ctx, good); err != nil {
		t.Fatal(err)
	}
	bad.CreateBucket = false
	if _, err := open(bad); !strings.Contains(err.Error(), "access denied") {
		t.Errorf("a wrong secret, bucket present: %v", err)
	}

	ports, err := localcluster.FreePorts(0) // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	down := objstoreConfig(t, fmt.Sprintf("http://127.0.0.1:%d", ports.ObjectStore), localcluster.ObjectStoreSecretKey, "")
	down.Timeout = time.Second
	took, err = open(down)
	if !strings.Contains(err.Error(), "connection refused") || took > 15*time.Second {
		t.Errorf("a store that is down: after %v: %v", took, err)
	}
	t.Logf("a store that is down fails Open after %v: %v", took.Round(time.Millisecond), err)

	// A store that takes connections and never answers: each attempt ends
	// at the timeout.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	hung := objstoreConfig(t, "http://"+ln.Addr().String(), localcluster.ObjectStoreSecretKey, "")
	hung.Timeout = time.Second
	took, err = open(hung)
	var netErr net.Error
	if !errors.As(err, &netErr) || !netErr.Timeout() || took < 2*time.Second || took > 15*time.Second {
		t.Errorf("a store that does not answer: after %v: %v", took, err)
	}
	t.Logf("a store that does not answer fails Open after %v: %v", took.Round(time.Millisecond), err)
}
