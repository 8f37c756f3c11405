package app

import (
	"strings"
	"testing"
)

// FuzzParseConfig: any command line is either a configuration or an error
// with a reason, never a panic.
func FuzzParseConfig(f *testing.F) {
	f.Add("-id\x001\x00-peers\x001=127.0.0.1:7071=127.0.0.1:7070,2=127.0.0.1:7074=127.0.0.1:7073")
	f.Add("-session-timeout=0\x00-producer-id-block-size=-5")
	f.Add("-peers\x00=,==,1=a=b=c\x00-raft-log-level=loud")
	f.Fuzz(func(t *testing.T, line string) {
		if _, err := ParseConfig(strings.Split(line, "\x00")); err != nil && err.Error() == "" {
			t.Fatal("an error without a reason")
		}
	})
}
