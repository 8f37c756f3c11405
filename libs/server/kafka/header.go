package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrMalformed: a request whose bytes do not decode.
var ErrMalformed = errors.New("malformed request")

// Header is a request header (Kafka's RequestHeader v1 and v2).
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
	// Flexible: the request (and so its header) uses the flexible
	// encoding; the header then ends with tagged fields.
	Flexible bool
}

// Name returns the API's name ("Produce", "Unknown").
func (h *Header) Name() string { return kmsg.NameForKey(h.Key) }

// flexibleFrom returns the first flexible version of an API (KIP-482), or
// -1 when kmsg does not know the key.
func flexibleFrom(key int16) int16 {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return -1
	}
	for v := int16(0); v <= req.MaxVersion(); v++ {
		req.SetVersion(v)
		if req.IsFlexible() {
			return v
		}
	}
	return req.MaxVersion() + 1 // never flexible
}

// parseHeader reads a request header from frame and returns it with the
// body that follows. A version past what kmsg knows is taken as flexible
// when the API's last known version is (a newer client's ApiVersions).
func parseHeader(frame []byte) (Header, []byte, error) {
	var h Header
	if len(frame) < 10 {
		return h, nil, fmt.Errorf("%w: %d bytes, shorter than a request header", ErrMalformed, len(frame))
	}
	h.Key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	n := int16(binary.BigEndian.Uint16(frame[8:]))
	rest := frame[10:]
	if n >= 0 {
		if int(n) > len(rest) {
			return h, nil, fmt.Errorf("%w: client id of %d bytes, %d left in the frame", ErrMalformed, n, len(rest))
		}
		h.ClientID, rest = string(rest[:n]), rest[n:]
	} else if n != -1 {
		return h, nil, fmt.Errorf("%w: client id length %d", ErrMalformed, n)
	}
	if h.Version < 0 {
		return h, nil, fmt.Errorf("%w: negative API version %d", ErrMalformed, h.Version)
	}
	if f := flexibleFrom(h.Key); f >= 0 && h.Version >= f {
		h.Flexible = true
		var err error
		if rest, err = skipTags(rest); err != nil {
			return h, nil, fmt.Errorf("%w: header tagged fields: %w", ErrMalformed, err)
		}
	}
	return h, rest, nil
}

// skipTags skips a tagged-field section (a count, then tag, size and bytes
// for each) and returns what follows.
func skipTags(b []byte) ([]byte, error) {
	n, b, err := uvarint(b)
	if err != nil {
		return nil, err
	}
	for i := uint64(0); i < n; i++ {
		if _, b, err = uvarint(b); err != nil {
			return nil, err
		}
		var size uint64
		if size, b, err = uvarint(b); err != nil {
			return nil, err
		}
		if size > uint64(len(b)) {
			return nil, fmt.Errorf("tagged field of %d bytes, %d left", size, len(b))
		}
		b = b[size:]
	}
	return b, nil
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v > 1<<31 {
		return 0, nil, errors.New("bad unsigned varint")
	}
	return v, b[n:], nil
}

// appendResponseHeader appends a response header: the correlation id, and
// an empty tagged-field section for flexible responses (header v1), except
// ApiVersions, whose response header is always v0 (clients read it before
// they know which versions the broker speaks).
func appendResponseHeader(dst []byte, h *Header) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.CorrelationID))
	if h.Flexible && h.Key != apiVersionsKey {
		dst = append(dst, 0)
	}
	return dst
}

// apiVersionsKey is ApiVersions' key, which the server answers itself.
const apiVersionsKey = 18
