package service

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// FlagSet is a flag.FlagSet in which every flag also reads an environment
// variable: flag "segment-bytes" of any binary falls back to
// SLUICE_SEGMENT_BYTES. A flag on the command line wins over the environment.
type FlagSet struct {
	*flag.FlagSet
	lookupEnv func(string) (string, bool)
}

// versionFlag prints the build and exits (Main looks for it before
// parsing); it has no environment fallback.
const versionFlag = "version"

// NewFlagSet returns a FlagSet for the named binary holding -version.
func NewFlagSet(name string) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Bool(versionFlag, false, "print the version, the commit and the Go version, and exit")
	return &FlagSet{FlagSet: fs, lookupEnv: os.LookupEnv}
}

// EnvName returns the environment variable that backs a flag.
func EnvName(flagName string) string {
	return "SLUICE_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// Duration, String, Int, Int64 and Bool register flags whose usage text names
// their environment variable.
func (f *FlagSet) Duration(p *time.Duration, name string, def time.Duration, usage string) {
	f.DurationVar(p, name, def, usage+" ($"+EnvName(name)+")")
}

// String registers a string flag.
func (f *FlagSet) String(p *string, name, def, usage string) {
	f.StringVar(p, name, def, usage+" ($"+EnvName(name)+")")
}

// Int registers an int flag.
func (f *FlagSet) Int(p *int, name string, def int, usage string) {
	f.IntVar(p, name, def, usage+" ($"+EnvName(name)+")")
}

// Int64 registers an int64 flag.
func (f *FlagSet) Int64(p *int64, name string, def int64, usage string) {
	f.Int64Var(p, name, def, usage+" ($"+EnvName(name)+")")
}

// Bool registers a bool flag.
func (f *FlagSet) Bool(p *bool, name string, def bool, usage string) {
	f.BoolVar(p, name, def, usage+" ($"+EnvName(name)+")")
}

// Parse applies environment fallbacks and then the command line. Errors name the
// flag and, for environment values, the variable.
func (f *FlagSet) Parse(args []string) error {
	var envErr error
	f.VisitAll(func(fl *flag.Flag) {
		if envErr != nil || fl.Name == versionFlag {
			return
		}
		env := EnvName(fl.Name)
		if v, ok := f.lookupEnv(env); ok {
			if err := fl.Value.Set(v); err != nil {
				envErr = fmt.Errorf("invalid value %q for flag -%s (from $%s): %w", v, fl.Name, env, err)
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	f.SetOutput(io.Discard)
	if err := f.FlagSet.Parse(args); err != nil {
		if err == flag.ErrHelp {
			f.SetOutput(os.Stderr)
			f.PrintDefaults()
		}
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", f.Arg(0))
	}
	return nil
}
