package config

import (
	"strings"
	"testing"
)

// FuzzParse: any command line is either a configuration that validates or an
// error with a reason, never a panic.
func FuzzParse(f *testing.F) {
	f.Add("-http-addr\x00127.0.0.1:0\x00-metadata\x00http://a:1,b:2")
	f.Add("-max-body-bytes=-1\x00-linger=1h")
	f.Add("-console-refresh=1.5s\x00-produce-retries=x\x00extra")
	f.Fuzz(func(t *testing.T, line string) {
		c, err := Parse(strings.Split(line, "\x00"))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a reason")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a configuration that does not validate: %v", err)
		}
	})
}
