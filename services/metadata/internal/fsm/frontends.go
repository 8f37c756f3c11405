package fsm

import (
	"fmt"
	"maps"
	"math"
	"net"
	"slices"

	"github.com/sluicemq/sluice/libs/cluster"
)

// Frontends and cluster-wide settings.
//
// A frontend with a Kafka listener registers (RegisterFrontend) and is
// removed when its session lapses (RemoveFrontend, proposed by the
// controller). Its id is kept by name while it is registered, so a frontend
// that restarts within its session keeps the id Kafka clients know; ids
// start at cluster.FrontendIDBase and the lowest free one is taken.

// RegisterFrontend adds or replaces a frontend by name and sets its epoch
// to the entry's index.
type RegisterFrontend struct {
	Name      string `json:"name"`
	KafkaAddr string `json:"kafka_addr"`
	Rack      string `json:"rack,omitempty"`
}

// RemoveFrontend removes a frontend whose session lapsed. It applies only
// at the frontend's current epoch, so a removal decided about an earlier
// registration cannot remove a newer one.
type RemoveFrontend struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// SetClusterConfig changes cluster-wide settings (cluster.ClusterConfig):
// Delete returns keys to their defaults, Set overrides keys (after Delete,
// as for topic configs). The result is validated when applied.
type SetClusterConfig struct {
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

// maxFrontendName bounds a frontend's name.
const maxFrontendName = 255

// ErrInvalidFrontend: a frontend registration that is not valid.
var ErrInvalidFrontend = fmt.Errorf("%w: invalid frontend", ErrMalformedCommand)

func (s *state) registerFrontend(index uint64, c *RegisterFrontend) (cluster.Frontend, error) {
	if c.Name == "" || len(c.Name) > maxFrontendName {
		return cluster.Frontend{}, fmt.Errorf("%w: name of %d bytes (1..%d)", ErrInvalidFrontend, len(c.Name), maxFrontendName)
	}
	if _, port, err := net.SplitHostPort(c.KafkaAddr); err != nil || port == "" {
		return cluster.Frontend{}, fmt.Errorf("%w: kafka address %q is not host:port", ErrInvalidFrontend, c.KafkaAddr)
	}
	id := int32(-1)
	for fid, f := range s.frontends {
		if f.Name == c.Name {
			id = fid
		}
	}
	if id < 0 {
		for id = cluster.FrontendIDBase; s.frontends[id] != nil; id++ {
			if id == math.MaxInt32 {
				return cluster.Frontend{}, fmt.Errorf("%w: no frontend id left", ErrInvalidFrontend)
			}
		}
	}
	f := &cluster.Frontend{ID: id, Name: c.Name, KafkaAddr: c.KafkaAddr, Rack: c.Rack, Epoch: int64(index)}
	s.frontends[id] = f
	return *f, nil
}

func (s *state) removeFrontend(c *RemoveFrontend) (bool, error) {
	f, ok := s.frontends[c.ID]
	if !ok || f.Epoch != c.Epoch {
		return false, fmt.Errorf("%w: frontend %d is not registered at epoch %d", ErrStaleNodeEpoch, c.ID, c.Epoch)
	}
	delete(s.frontends, c.ID)
	return true, nil
}

func (s *state) setClusterConfig(c *SetClusterConfig) (bool, error) {
	next := cluster.AlterTopicConfigRequest{Set: c.Set, Delete: c.Delete}.Apply(s.config)
	if _, err := cluster.ParseClusterConfig(next); err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if maps.Equal(next, s.config) || len(next) == 0 && len(s.config) == 0 {
		return false, nil
	}
	s.config = next
	return true, nil
}

// Settings returns the cluster-wide settings (the defaults for any this
// version cannot read).
func (f *FSM) Settings() cluster.ClusterConfig {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return cluster.SettingsOf(f.st.config)
}

func (s *state) sortedFrontends() []cluster.Frontend {
	if len(s.frontends) == 0 {
		return nil
	}
	out := make([]cluster.Frontend, 0, len(s.frontends))
	for _, id := range slices.Sorted(maps.Keys(s.frontends)) {
		out = append(out, *s.frontends[id])
	}
	return out
}

// Frontend returns a copy of the frontend with the given id.
func (f *FSM) Frontend(id int32) (cluster.Frontend, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fe, ok := f.st.frontends[id]
	if !ok {
		return cluster.Frontend{}, false
	}
	return *fe, true
}

// Frontends returns copies of every registered frontend, by id.
func (f *FSM) Frontends() []cluster.Frontend {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.sortedFrontends()
}
