package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

func TestMemPutGetRange(t *testing.T) {
	ctx := context.Background()
	m := NewMem()
	if err := m.Put(ctx, "a/1", strings.NewReader("0123456789"), 10); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off, n int64
		want   string // "" with err
		err    error
	}{
		{0, 10, "0123456789", nil},
		{2, 3, "234", nil},
		{7, 3, "789", nil},
		{4, -1, "456789", nil},
		{10, -1, "", nil},
		{10, 0, "", nil},
		{0, 0, "", nil},
		{8, 3, "", io.ErrUnexpectedEOF},
		{11, -1, "", io.ErrUnexpectedEOF},
		{11, 0, "", io.ErrUnexpectedEOF},
	} {
		got, err := m.GetRange(ctx, "a/1", c.off, c.n)
		if !errors.Is(err, c.err) || string(got) != c.want {
			t.Errorf("GetRange(%d, %d) = %q, %v; want %q, %v", c.off, c.n, got, err, c.want, c.err)
		}
	}
	if _, err := m.GetRange(ctx, "a/2", 0, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	// A Put replaces the whole object; a body shorter than size fails and
	// changes nothing.
	if err := m.Put(ctx, "a/1", strings.NewReader("xy"), 2); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(ctx, "a/1", strings.NewReader("abc"), 4); err == nil {
		t.Fatal("a body shorter than size was accepted")
	}
	if got, err := m.GetRange(ctx, "a/1", 0, -1); err != nil || string(got) != "xy" {
		t.Fatalf("after overwrite: %q, %v", got, err)
	}
}

func TestMemListAndDelete(t *testing.T) {
	ctx := context.Background()
	m := NewMem()
	for _, k := range []string{"t/2", "t/10", "u/1", "t/1"} {
		if err := m.Put(ctx, k, bytes.NewReader([]byte(k)), int64(len(k))); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(prefix string) string {
		objs, err := m.List(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, o := range objs {
			if o.Size != int64(len(o.Key)) || o.Modified.IsZero() {
				t.Fatalf("object %+v", o)
			}
			ks = append(ks, o.Key)
		}
		return strings.Join(ks, " ")
	}
	if got := keys("t/"); got != "t/1 t/10 t/2" {
		t.Fatalf("List(t/) = %q", got)
	}
	if got := keys(""); got != "t/1 t/10 t/2 u/1" {
		t.Fatalf("List() = %q", got)
	}
	if err := m.Delete(ctx, "t/1", "missing", "t/2"); err != nil {
		t.Fatal(err)
	}
	if got := keys(""); got != "t/10 u/1" {
		t.Fatalf("after Delete: %q", got)
	}
	if err := m.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMemFaults(t *testing.T) {
	ctx := context.Background()
	m := NewMem()
	if err := m.Put(ctx, "k", strings.NewReader("abc"), 3); err != nil {
		t.Fatal(err)
	}
	down := errors.New("store down")
	var asked []string
	m.SetFault(func(op, key string) error {
		asked = append(asked, op+" "+key)
		if key == "k" || op == OpList {
			return down
		}
		return nil
	})
	if err := m.Put(ctx, "k", strings.NewReader("xyz"), 3); !errors.Is(err, down) || !strings.Contains(err.Error(), `put "k"`) {
		t.Fatalf("Put under a fault: %v", err)
	}
	if _, err := m.GetRange(ctx, "k", 0, 1); !errors.Is(err, down) {
		t.Fatalf("GetRange under a fault: %v", err)
	}
	if _, err := m.List(ctx, "p"); !errors.Is(err, down) {
		t.Fatalf("List under a fault: %v", err)
	}
	// Delete stops at the failing key, after deleting the ones before it.
	if err := m.Put(ctx, "j", strings.NewReader("j"), 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "j", "k"); !errors.Is(err, down) {
		t.Fatalf("Delete under a fault: %v", err)
	}
	want := "put k|get k|list p|put j|delete j|delete k"
	if got := strings.Join(asked, "|"); got != want {
		t.Fatalf("fault asked %q, want %q", got, want)
	}
	m.SetFault(nil)
	if got := m.Objects(); len(got) != 1 || string(got["k"]) != "abc" {
		t.Fatalf("objects after the faults: %q", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.GetRange(cancelled, "k", 0, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func TestMemCorruptAndCopies(t *testing.T) {
	ctx := context.Background()
	m := NewMem()
	if err := m.Put(ctx, "k", strings.NewReader("abc"), 3); err != nil {
		t.Fatal(err)
	}
	before, _ := m.GetRange(ctx, "k", 0, -1)
	objs := m.Objects()
	objs["k"][0] = 'z' // a copy: the store keeps its bytes
	m.Corrupt("k", 1)
	got, _ := m.GetRange(ctx, "k", 0, -1)
	if want := []byte{'a', 'b' ^ 0xff, 'c'}; !bytes.Equal(got, want) {
		t.Fatalf("after Corrupt: %q, want %q", got, want)
	}
	if string(before) != "abc" {
		t.Fatalf("Corrupt changed an earlier read: %q", before)
	}
}

func TestMemConcurrentUse(t *testing.T) {
	ctx := context.Background()
	m := NewMem()
	m.SetFault(func(op, key string) error { return nil })
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				k := fmt.Sprintf("g%d/%d", g, i)
				if err := m.Put(ctx, k, strings.NewReader(k), int64(len(k))); err != nil {
					t.Error(err)
					return
				}
				if b, err := m.GetRange(ctx, k, 0, -1); err != nil || string(b) != k {
					t.Errorf("GetRange(%s) = %q, %v", k, b, err)
					return
				}
				if _, err := m.List(ctx, fmt.Sprintf("g%d/", g)); err != nil {
					t.Error(err)
				}
				m.Corrupt(k, 0)
				_ = m.Objects()
				if i%2 == 0 {
					if err := m.Delete(ctx, k); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if n := len(m.Objects()); n != 4*25 {
		t.Fatalf("%d objects left, want 100", n)
	}
}
