package fsm

import (
	"fmt"

	"github.com/sluicemq/sluice/libs/cluster"
)

// setQuota applies a SetQuota command; changed is false when the quota in
// force stays the same.
func (s *state) setQuota(q *cluster.Quota) (bool, error) {
	switch {
	case len(q.ClientID) > cluster.MaxClientIDLen:
		return false, fmt.Errorf("%w: client id of %d bytes (at most %d)", ErrInvalidQuota, len(q.ClientID), cluster.MaxClientIDLen)
	case q.ProduceBytesPerSec < 0 || q.FetchBytesPerSec < 0:
		return false, fmt.Errorf("%w: negative rate (0 is no limit)", ErrInvalidQuota)
	}
	old, had := s.quotas[q.ClientID]
	if q.ProduceBytesPerSec == 0 && q.FetchBytesPerSec == 0 {
		delete(s.quotas, q.ClientID)
		return had, nil
	}
	s.quotas[q.ClientID] = *q
	return !had || old != *q, nil
}
