package ops

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
)

// tourStep is one command of a ```console block of the docs: the command
// after "$ " (with its "\"-continued lines) and the lines printed after it,
// in which a line "..." stands for any number of lines.
type tourStep struct {
	file, command string
	line          int
	want          []string
}

// tourSteps reads the ```console blocks of a Markdown file.
func tourSteps(t *testing.T, path string) []tourStep {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []tourStep
	in := false
	lines := strings.Split(string(raw), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case !in && strings.TrimSpace(l) == "```console":
			in = true
		case in && strings.TrimSpace(l) == "```":
			in = false
		case in && strings.HasPrefix(l, "$ "):
			st := tourStep{file: filepath.Base(path), line: i + 1, command: strings.TrimPrefix(l, "$ ")}
			for strings.HasSuffix(st.command, "\\") && i+1 < len(lines) {
				i++
				st.command += "\n" + lines[i]
			}
			steps = append(steps, st)
		case in && len(steps) > 0:
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, l)
		case in:
			t.Fatalf("%s:%d: a console block must start with a command (\"$ ...\")", path, i+1)
		}
	}
	if in {
		t.Fatalf("%s: a console block is not closed", path)
	}
	return steps
}

// matchLines reports whether got matches want line for line, a want line
// "..." matching any number of lines and one ending in " ..." any line that
// begins with what comes before (trailing spaces are ignored).
func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for i := 0; i <= len(got); i++ {
			if matchLines(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && lineMatches(want[0], got[0]) && matchLines(want[1:], got[1:])
}

func lineMatches(want, got string) bool {
	want, got = strings.TrimRight(want, " "), strings.TrimRight(got, " ")
	if prefix, ok := strings.CutSuffix(want, " ..."); ok {
		return strings.HasPrefix(got, prefix)
	}
	return want == got
}

// TestMatchLines: "..." stands for any number of lines, anywhere; every
// other line must be there, in order.
func TestMatchLines(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		want, got string
		ok        bool
	}{
		{"", "", true},
		{"", "a", false},
		{"a\nb", "a\nb", true},
		{"a\nb", "a\nc", false},
		{"a\n...\nd", "a\nb\nc\nd", true},
		{"a\n...\nd", "a\nd", true},
		{"a\n...\nd", "a\nb\nc", false},
		{"...", "x\ny", true},
		{"...", "", true},
		{"a  ", "a", true},
		{"Group: g  Epoch: ...", "Group: g  Epoch: 4  Members: 0", true},
		{"Group: g  Epoch: ...", "Group: h  Epoch: 4", false},
	} {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, "\n")
		}
		if got := matchLines(split(tc.want), split(tc.got)); got != tc.ok {
			t.Errorf("want %q, got %q: matched %v", tc.want, tc.got, got)
		}
	}
}

// TestReadmeTour runs the ```console blocks of README.md and
// docs/getting-started.md as a user would, one after the other against a
// fresh `make run` cluster (sluice-dev), with the files' own commands: bash
// runs each in a directory whose ./bin holds the binaries and ./data the
// cluster's data, with make run's addresses replaced by the cluster's (it
// listens on free ports). Each command must succeed and print what the doc
// shows; "..." in the doc stands for lines it leaves out.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	var steps []tourStep
	for _, f := range []string{"../../../README.md", "../../../docs/getting-started.md"} {
		steps = append(steps, tourSteps(t, f)...)
	}
	if len(steps) < 10 {
		t.Fatalf("the tour has %d commands: the docs lost their console blocks", len(steps))
	}
	itest.NeedTool(t, "kcat", "kcat")
	itest.NeedTool(t, "curl", "curl")
	d := startDev(t)
	work := filepath.Dir(d.data)
	if err := os.Symlink(d.bin, filepath.Join(work, "bin")); err != nil {
		t.Fatal(err)
	}
	frontend := strings.TrimPrefix(d.frontend, "http://")
	addrs := strings.NewReplacer("127.0.0.1:8080", frontend, "127.0.0.1:9092", d.kafka)
	back := strings.NewReplacer(frontend, "127.0.0.1:8080", d.kafka, "127.0.0.1:9092")
	env := append(os.Environ(), "SLUICE_FRONTEND="+d.frontend, "SLUICE_METADATA="+d.metadata, "SLUICE_OFFSETS="+d.offsets)
	for _, st := range steps {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", addrs.Replace(st.command))
		cmd.Dir, cmd.Env = work, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		printed := back.Replace(out.String())
		got := strings.Split(strings.TrimRight(printed, "\n"), "\n")
		if out.Len() == 0 {
			got = nil
		}
		if err != nil {
			t.Fatalf("%s:%d: $ %s\n%v\n%s", st.file, st.line, st.command, err, out.String())
		}
		if !matchLines(st.want, got) {
			t.Fatalf("%s:%d: $ %s\nprinted:\n%s\nthe doc shows:\n%s", st.file, st.line, st.command, printed, strings.Join(st.want, "\n"))
		}
		t.Logf("%s:%d: $ %s", st.file, st.line, st.command)
	}
}
