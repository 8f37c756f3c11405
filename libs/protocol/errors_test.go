package protocol

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

// TestEveryCodeHasAStatus: each code of the table has an HTTP status, and
// the statuses follow the codes' meaning: only NONE is 2xx; a retriable code
// is 5xx or 429, unless it names something missing (404) or a bad batch
// (CORRUPT_RECORD, 400); a code that is not retriable is never 503.
func TestEveryCodeHasAStatus(t *testing.T) {
	for _, info := range Codes() {
		switch {
		case info.Status == 0 || http.StatusText(info.Status) == "":
			t.Errorf("%s: no HTTP status", info.Name)
		case info.Code == None:
			if info.Status != http.StatusOK {
				t.Errorf("NONE: %d", info.Status)
			}
		case info.Status < 400:
			t.Errorf("%s: status %d for an error", info.Name, info.Status)
		case info.Retriable && info.Status < 500 && info.Status != http.StatusTooManyRequests &&
			info.Status != http.StatusNotFound && info.Code != CorruptRecord:
			t.Errorf("%s is retriable but answered %d", info.Name, info.Status)
		case !info.Retriable && info.Status == http.StatusServiceUnavailable:
			t.Errorf("%s is not retriable but answered 503", info.Name)
		}
		if info.Code.HTTPStatus() != info.Status {
			t.Errorf("%s: HTTPStatus %d, table %d", info.Name, info.Code.HTTPStatus(), info.Status)
		}
	}
	if Code(4242).HTTPStatus() != http.StatusInternalServerError {
		t.Error("an unknown code is not a 500")
	}
}

func TestHTTPStatusOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, http.StatusOK},
		{errors.New("plain"), http.StatusInternalServerError},
		{TopicAlreadyExists.Err("x"), http.StatusConflict},
		{fmt.Errorf("wrapped: %w", ClusterAuthorizationFailed.Err("x")), http.StatusForbidden},
		{fmt.Errorf("relayed: %w", &Error{Code: NotController, Message: "x", Status: http.StatusBadGateway}), http.StatusBadGateway},
	} {
		if got := HTTPStatusOf(tc.err); got != tc.want {
			t.Errorf("HTTPStatusOf(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
