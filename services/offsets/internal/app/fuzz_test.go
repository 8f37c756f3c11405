package app

import (
	"strings"
	"testing"
)

// FuzzParseConfig: any command line is either a configuration or an error
// with a reason, never a panic.
func FuzzParseConfig(f *testing.F) {
	f.Add("-id\x001\x00-peers\x001=127.0.0.1:7081=127.0.0.1:7080")
	f.Add("-metadata\x00\x00-session-timeout=-1s")
	f.Add("-peers\x00=,==,1=a=b=c")
	f.Fuzz(func(t *testing.T, line string) {
		if _, err := ParseConfig(strings.Split(line, "\x00")); err != nil && err.Error() == "" {
			t.Fatal("an error without a reason")
		}
	})
}
