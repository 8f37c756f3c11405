package localcluster

import (
	"sync"
	"testing"
)

// TestFreePortsOutsideTheEphemeralRange: a cluster's ports are below the
// kernel's range of local ports for outgoing connections, so a restarted
// process finds its ports free, and they do not overlap.
func TestFreePortsOutsideTheEphemeralRange(t *testing.T) {
	lo, _ := ephemeralPorts()
	p, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	ports := []int{p.MetadataHTTP, p.MetadataRaft, p.MetadataAdmin, p.FrontendHTTP, p.FrontendAdmin, p.OffsetsHTTP, p.OffsetsRaft,
		p.OffsetsAdmin, p.StorageBase, p.StorageAdminBase, p.FrontendKafka, p.StorageKafkaBase}
	seen := map[int]bool{}
	for _, port := range ports {
		if port < 10000 || port+3*MaxVoters >= lo {
			t.Fatalf("port %d of %+v is not below the ephemeral range (from %d)", port, p, lo)
		}
		if seen[port] {
			t.Fatalf("port %d twice in %+v", port, p)
		}
		seen[port] = true
	}
}

// TestFreePortsHandsARunOutOnce: two clusters of one process asking at
// once (parallel tests, neither bound yet) get runs that do not overlap.
func TestFreePortsHandsARunOutOnce(t *testing.T) {
	runs := make(chan Ports, 8)
	var wg sync.WaitGroup
	for range cap(runs) {
		wg.Go(func() {
			p, err := FreePorts(3)
			if err != nil {
				t.Error(err)
				return
			}
			runs <- p
		})
	}
	wg.Wait()
	close(runs)
	owner := map[int]int{}
	i := 0
	for p := range runs {
		i++
		for port := p.MetadataHTTP; port <= p.StorageKafkaBase+3; port++ {
			if j, ok := owner[port]; ok {
				t.Fatalf("port %d handed to runs %d and %d", port, j, i)
			}
			owner[port] = i
		}
	}
}
