package localcluster

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// netnsLayout puts each storage node in its own Linux network namespace, so
// that tests can cut the link between two particular nodes (or between a node
// and the rest of the cluster). It needs root and iproute2.
//
// The nodes and the root namespace are wired to a bridge that lives in a
// namespace of its own (the "switch"): bridged traffic there meets no packet
// filter, whatever the root namespace's firewall does with forwarded packets
// (a Docker host drops them by default).
//
// Addresses: the bridge is 10.213.K.1 (K from the process id, so concurrent
// harnesses do not collide); storage node i is 10.213.K.(10+i). Metadata
// voters listen on the bridge address; the frontend and offsets service stay
// on 127.0.0.1 and reach the nodes through the bridge.
type netnsLayout struct {
	prefix string // names start with it: "sl<pid>"
	k      int    // third octet of the subnet
	nodes  int
}

func newNetns(nodes int) *netnsLayout {
	pid := os.Getpid()
	return &netnsLayout{prefix: "sl" + strconv.Itoa(pid%100000), k: 1 + pid%250, nodes: nodes}
}

func (n *netnsLayout) bridge() string        { return "br0" }
func (n *netnsLayout) switchNS() string      { return n.prefix + "s" }
func (n *netnsLayout) rootVeth() string      { return n.prefix + "r" }
func (n *netnsLayout) rootPeer() string      { return n.prefix + "q" }
func (n *netnsLayout) ns(i int) string       { return n.prefix + "n" + strconv.Itoa(i) }
func (n *netnsLayout) vethHost(i int) string { return n.prefix + "h" + strconv.Itoa(i) }
func (n *netnsLayout) vethNode(i int) string { return n.prefix + "p" + strconv.Itoa(i) }

// rootIP is the bridge's address, where root-namespace services listen.
func (n *netnsLayout) rootIP() string { return fmt.Sprintf("10.213.%d.1", n.k) }

// nodeIP is storage node i's address.
func (n *netnsLayout) nodeIP(i int) string { return fmt.Sprintf("10.213.%d.%d", n.k, 10+i) }

// setup creates the bridge, the namespaces and the links; it removes what an
// earlier, crashed run of the same process id left first.
func (n *netnsLayout) setup() error {
	n.teardown()
	sw := n.switchNS()
	cmds := [][]string{
		{"netns", "add", sw},
		{"-n", sw, "link", "set", "lo", "up"},
		{"-n", sw, "link", "add", n.bridge(), "type", "bridge"},
		{"-n", sw, "link", "set", n.bridge(), "up"},
		{"link", "add", n.rootVeth(), "type", "veth", "peer", "name", n.rootPeer()},
		{"link", "set", n.rootPeer(), "netns", sw},
		{"-n", sw, "link", "set", n.rootPeer(), "master", n.bridge()},
		{"-n", sw, "link", "set", n.rootPeer(), "up"},
		{"addr", "add", n.rootIP() + "/24", "dev", n.rootVeth()},
		{"link", "set", n.rootVeth(), "up"},
	}
	for i := 1; i <= n.nodes; i++ {
		cmds = append(cmds,
			[]string{"netns", "add", n.ns(i)},
			[]string{"link", "add", n.vethHost(i), "type", "veth", "peer", "name", n.vethNode(i)},
			[]string{"link", "set", n.vethHost(i), "netns", sw},
			[]string{"link", "set", n.vethNode(i), "netns", n.ns(i)},
			[]string{"-n", sw, "link", "set", n.vethHost(i), "master", n.bridge()},
			[]string{"-n", sw, "link", "set", n.vethHost(i), "up"},
			[]string{"-n", n.ns(i), "addr", "add", n.nodeIP(i) + "/24", "dev", n.vethNode(i)},
			[]string{"-n", n.ns(i), "link", "set", n.vethNode(i), "up"},
			[]string{"-n", n.ns(i), "link", "set", "lo", "up"},
		)
	}
	for _, c := range cmds {
		if err := ip(c...); err != nil {
			n.teardown()
			return err
		}
	}
	return nil
}

// teardown removes the namespaces (their veths and the bridge go with them)
// and the root end of the switch link.
func (n *netnsLayout) teardown() {
	for i := 1; i <= n.nodes; i++ {
		_ = ip("netns", "del", n.ns(i))
	}
	_ = ip("netns", "del", n.switchNS())
	_ = ip("link", "del", n.rootVeth())
}

// wrap returns the command line that runs bin inside node i's namespace.
func (n *netnsLayout) wrap(i int, bin string, args []string) (string, []string) {
	return "ip", append([]string{"netns", "exec", n.ns(i), bin}, args...)
}

// blackhole adds (or removes) a route in node i's namespace that drops every
// packet it sends to ipAddr: one direction of a cut link.
func (n *netnsLayout) blackhole(i int, ipAddr string, add bool) error {
	verb := "add"
	if !add {
		verb = "del"
	}
	return ip("-n", n.ns(i), "route", verb, "blackhole", ipAddr+"/32")
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NetnsAvailable reports whether this process can build the namespace layout
// (root with iproute2), and why not.
func NetnsAvailable() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("iproute2 (ip) is not installed")
	}
	probe := "slprobe" + strconv.Itoa(os.Getpid()%100000)
	if err := ip("netns", "add", probe); err != nil {
		return err
	}
	return ip("netns", "del", probe)
}

// Cut drops all traffic between storage nodes a and b, in both directions;
// node 0 stands for the root namespace (metadata, frontend, offsets, tests).
func (c *Cluster) Cut(a, b int) error { return c.link(a, b, true) }

// Heal restores the link Cut removed.
func (c *Cluster) Heal(a, b int) error { return c.link(a, b, false) }

func (c *Cluster) link(a, b int, cut bool) error {
	n := c.netns
	if n == nil {
		return fmt.Errorf("localcluster: links can be cut only with Config.Netns")
	}
	addrOf := func(i int) string {
		if i == 0 {
			return n.rootIP()
		}
		return n.nodeIP(i)
	}
	if a > 0 {
		if err := n.blackhole(a, addrOf(b), cut); err != nil {
			return err
		}
	}
	if b > 0 {
		if err := n.blackhole(b, addrOf(a), cut); err != nil {
			return err
		}
	}
	return nil
}
