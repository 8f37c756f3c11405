package api

import (
	"net/http"
	"testing"

	"github.com/sluicemq/sluice/libs/protocol"
)

func TestLag(t *testing.T) {
	for _, tc := range []struct {
		committed, start, end, want int64
	}{
		{committed: 40, start: 0, end: 100, want: 60},
		{committed: 100, start: 0, end: 100, want: 0},
		{committed: -1, start: 0, end: 100, want: 100}, // nothing committed: everything readable
		{committed: -1, start: 30, end: 100, want: 70},
		{committed: 10, start: 30, end: 100, want: 70}, // retention passed the commit: 10..29 are gone
		{committed: 120, start: 0, end: 100, want: 0},  // a commit past the end (log truncated) is not negative lag
	} {
		if got := Lag(tc.committed, tc.start, tc.end); got != tc.want {
			t.Errorf("Lag(%d, %d, %d) = %d, want %d", tc.committed, tc.start, tc.end, got, tc.want)
		}
	}
}

func TestStatusOfCodes(t *testing.T) {
	for code, want := range map[protocol.Code]int{
		protocol.InvalidGroupID:     http.StatusBadRequest,
		protocol.GroupIDNotFound:    http.StatusNotFound,
		protocol.UnknownMemberID:    http.StatusConflict,
		protocol.FencedMemberEpoch:  http.StatusConflict,
		protocol.NonEmptyGroup:      http.StatusConflict,
		protocol.NotCoordinator:     http.StatusServiceUnavailable,
		protocol.UnknownServerError: http.StatusInternalServerError,
	} {
		if got := statusOf(code); got != want {
			t.Errorf("%v: %d, want %d", code, got, want)
		}
	}
}
