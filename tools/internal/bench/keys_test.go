package bench

import (
	"strings"
	"testing"
)

func TestKeySpecParse(t *testing.T) {
	for _, s := range []string{"none", "random", "fixed:1", "fixed:1000"} {
		k, err := ParseKeySpec(s)
		if err != nil || k.String() != s {
			t.Errorf("%q: %+v (%q), %v", s, k, k.String(), err)
		}
	}
	for _, s := range []string{"", "fixed", "fixed:", "fixed:0", "fixed:-2", "fixed:x", "Random"} {
		if _, err := ParseKeySpec(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	if got := (KeySpec{Kind: KeysFixed, N: 1000}).MaxLen(); got != len("key-999") {
		t.Errorf("MaxLen fixed:1000 = %d", got)
	}
}

func TestNoKeys(t *testing.T) {
	g := KeySpec{Kind: KeysNone}.NewGen(1, 0)
	for i := 0; i < 3; i++ {
		if k := g.Next(); k != nil {
			t.Fatalf("key %q, want nil (sticky partitioner)", k)
		}
	}
}

func TestRandomKeys(t *testing.T) {
	g := KeySpec{Kind: KeysRandom}.NewGen(7, 0)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		k := string(g.Next())
		if len(k) != randomKeyLen || strings.Trim(k, keyAlphabet) != "" {
			t.Fatalf("key %q: want %d characters of %s", k, randomKeyLen, keyAlphabet)
		}
		seen[k] = true
	}
	if len(seen) != 1000 {
		t.Fatalf("%d distinct keys of 1000", len(seen))
	}
	// The same seed gives the same keys; another seed others.
	a, b, c := KeySpec{Kind: KeysRandom}.NewGen(7, 0), KeySpec{Kind: KeysRandom}.NewGen(7, 0), KeySpec{Kind: KeysRandom}.NewGen(8, 0)
	ka := string(a.Next())
	if ka != string(b.Next()) || ka == string(c.Next()) {
		t.Fatal("random keys do not follow their seed")
	}
}

func TestFixedKeysRoundRobin(t *testing.T) {
	g := KeySpec{Kind: KeysFixed, N: 3}.NewGen(0, 4) // starts at 4 % 3
	var got []string
	for i := 0; i < 7; i++ {
		got = append(got, string(g.Next()))
	}
	if want := "key-1 key-2 key-0 key-1 key-2 key-0 key-1"; strings.Join(got, " ") != want {
		t.Fatalf("keys %v, want %s", got, want)
	}
}
