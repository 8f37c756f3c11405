// Package protocol is Sluice's storage protocol: the TCP framing, the request and
// response headers, the bodies of each API and the table of wire error codes.
//
// A frame on the wire is
//
//	uint32 length (big endian) | msgpack header | raw payload
//
// where length counts the header and the payload. The header is one msgpack array
// whose fields name the API, its version, the correlation id and the payload's
// length, followed by the API's body. The payload, when present, is raw
// RecordBatch v2 bytes: the same bytes the producer built and the segment file
// holds, so the broker can write them to disk and send them with sendfile
// without decoding them.
//
// Invariants:
//   - a frame's stated length equals the header's encoded size plus the payload
//     length the header states; any mismatch is ErrMalformedFrame;
//   - decoders never panic on input and never read past the frame they were
//     given (frames are cut from the stream first, then decoded);
//   - bodies are encoded as arrays by hand-written code, and decoders skip
//     trailing fields they do not know, so a newer peer may append fields.
package protocol
