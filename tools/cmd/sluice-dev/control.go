package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// The control protocol is HTTP on a Unix socket in the data directory:
//
//	GET  /status          [localcluster.ProcStatus]
//	POST /{action}/{name} action kill, stop, start or restart; answers the
//	                      process's status, or 4xx/5xx with the reason as text

// controlServer answers the commands of `sluice-dev NAME ...` while the
// cluster runs.
type controlServer struct {
	path string
	ln   net.Listener
	srv  *http.Server
	wg   sync.WaitGroup
}

// listenControl listens on the socket at path. A socket another launcher
// still answers on is refused; a stale one (a launcher killed with SIGKILL)
// is replaced.
func listenControl(path string) (*controlServer, error) {
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		conn.Close()
		return nil, fmt.Errorf("another sluice-dev runs on this data directory (%s answers); stop it first", path)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return &controlServer{path: path, ln: ln}, nil
}

// serve answers commands in the background until Close.
func (s *controlServer) serve(ctx context.Context, c *localcluster.Cluster, sup *localcluster.Supervisor) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(sup.Status())
	})
	mux.HandleFunc("POST /{action}/{name}", func(w http.ResponseWriter, r *http.Request) {
		p := c.Proc(r.PathValue("name"))
		if p == nil {
			http.Error(w, fmt.Sprintf("no process %q; the processes are %s", r.PathValue("name"), strings.Join(names(c), ", ")), http.StatusNotFound)
			return
		}
		var err error
		switch r.PathValue("action") {
		case "kill":
			sup.Kill(p)
		case "stop":
			sup.Stop(p)
		case "start":
			err = sup.Start(r.Context(), p)
		case "restart":
			err = sup.Restart(r.Context(), p)
		default:
			http.Error(w, "unknown action "+r.PathValue("action")+"; want kill, stop, start or restart", http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		for _, st := range sup.Status() {
			if st.Name == p.Name {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(st)
			}
		}
	})
	s.srv = &http.Server{Handler: mux, BaseContext: func(net.Listener) context.Context { return ctx }}
	s.wg.Go(func() { _ = s.srv.Serve(s.ln) })
}

// Close stops answering, waits for the commands under way (a start returns
// at once when the launcher stops) and removes the socket.
func (s *controlServer) Close() {
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = s.srv.Shutdown(ctx)
		cancel()
		s.wg.Wait()
	} else {
		s.ln.Close()
	}
	_ = os.Remove(s.path)
}

func names(c *localcluster.Cluster) []string {
	var out []string
	for _, p := range c.Procs {
		out = append(out, p.Name)
	}
	return out
}

// control runs one command against the launcher listening on socket and
// returns the exit status: 0 done, 1 refused or not reachable, 2 usage.
func control(stdout, stderr io.Writer, socket string, args []string) int {
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	defer hc.CloseIdleConnections()
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sluice-dev: "+format+"\n", a...)
		return 1
	}
	switch {
	case args[0] == "status" && (len(args) == 1 || len(args) == 3 && args[1] == "-o" && slices.Contains([]string{"json", "table"}, args[2])):
		resp, err := hc.Get("http://sluice-dev/status")
		if err != nil {
			return fail("no cluster answers on %s (is make run going, with this -data?): %v", socket, err)
		}
		defer resp.Body.Close()
		var sts []localcluster.ProcStatus
		if err := json.NewDecoder(resp.Body).Decode(&sts); err != nil {
			return fail("reading the status: %v", err)
		}
		if len(args) == 3 && args[2] == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(sts)
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tPID\tSTATE\tRESTARTS\tLAST EXIT")
		for _, st := range sts {
			pid := "-"
			if st.Pid != 0 {
				pid = fmt.Sprint(st.Pid)
			}
			last := st.LastExit
			if last == "" {
				last = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", st.Name, pid, st.State, st.Restarts, last)
		}
		_ = tw.Flush()
		return 0
	case len(args) == 2 && slices.Contains([]string{"kill", "stop", "start", "restart"}, args[0]):
		resp, err := hc.Post("http://sluice-dev/"+args[0]+"/"+args[1], "", nil)
		if err != nil {
			return fail("no cluster answers on %s (is make run going, with this -data?): %v", socket, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fail("%s %s: %s", args[0], args[1], strings.TrimSpace(string(body)))
		}
		var st localcluster.ProcStatus
		if err := json.Unmarshal(body, &st); err != nil {
			return fail("reading the answer: %v", err)
		}
		if st.Pid != 0 {
			fmt.Fprintf(stdout, "%s %s (pid %d)\n", st.Name, st.State, st.Pid)
		} else {
			fmt.Fprintf(stdout, "%s %s\n", st.Name, st.State)
		}
		return 0
	}
	fmt.Fprint(stderr, usage)
	return 2
}
