package record

// RawRecord is one record of an uncompressed batch as it is stored.
type RawRecord struct {
	Offset    int64
	Timestamp int64
	Key       []byte // nil for a null key; aliases the batch
	NullValue bool   // the value is null: a tombstone on a compacted topic
	// Bytes is the record's encoding, length prefix included (aliases the
	// batch): it can be copied into a batch with the same base offset and
	// base timestamp.
	Bytes []byte
}

// EachRaw calls fn for every record of the uncompressed batch b (header
// included; h is its parsed header), in order, checking each as the
// Iterator does. Errors wrap ErrCorrupt.
func EachRaw(b []byte, h *Header, fn func(RawRecord)) error {
	if h.Compression() != CodecNone {
		return corruptf("EachRaw of a %v batch", h.Compression())
	}
	d := recordDecoder{h: h, prevDelta: -1, start: h.BaseOffset}
	p := HeaderSize
	for range h.RecordCount {
		if p > len(b) {
			return corruptf("%d records in %d bytes", h.RecordCount, len(b))
		}
		d.recs, d.hdrs = d.recs[:0], d.hdrs[:0]
		n, err := d.decode(b[p:])
		if err != nil {
			return err
		}
		r := &d.recs[0]
		fn(RawRecord{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, NullValue: r.Value == nil, Bytes: b[p : p+n]})
		p += n
	}
	if p != len(b) {
		return corruptf("%d bytes after the last record", len(b)-p)
	}
	return nil
}
