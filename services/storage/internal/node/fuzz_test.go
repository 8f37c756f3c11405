package node

import (
	"strings"
	"testing"
)

// FuzzParse: any command line is either a set of fx options or an error
// with a reason, never a panic.
func FuzzParse(f *testing.F) {
	f.Add("-node-id\x002\x00-addr\x00127.0.0.1:0\x00-metadata\x00http://127.0.0.1:7070")
	f.Add("-node-id=0\x00-replica-lag-time-max=1ms")
	f.Add("-max-request-bytes=-1\x00-max-in-flight=0\x00-addr=nohost")
	f.Fuzz(func(t *testing.T, line string) {
		opts, err := Parse(strings.Split(line, "\x00"))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a reason")
			}
			return
		}
		if len(opts) == 0 {
			t.Fatal("no error and no options")
		}
	})
}
