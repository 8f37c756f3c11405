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
	return EachRawSection(b[HeaderSize:], h, fn)
}

// EachRawSection calls fn for every record of a batch's records section
// (what follows the header, decompressed: see Section), in order, checking
// each as the Iterator does. Errors wrap ErrCorrupt.
func EachRawSection(section []byte, h *Header, fn func(RawRecord)) error {
	d := recordDecoder{h: h, prevDelta: -1, start: h.BaseOffset}
	p := 0
	for range h.RecordCount {
		if p > len(section) {
			return corruptf("%d records in %d bytes", h.RecordCount, len(section))
		}
		d.recs, d.hdrs = d.recs[:0], d.hdrs[:0]
		n, err := d.decode(section[p:])
		if err != nil {
			return err
		}
		r := &d.recs[0]
		fn(RawRecord{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, NullValue: r.Value == nil, Bytes: section[p : p+n]})
		p += n
	}
	if p != len(section) {
		return corruptf("%d bytes after the last record", len(section)-p)
	}
	return nil
}

// Section returns the records section of batch b (h is its parsed header):
// the bytes after the header, decompressed into scratch (reused from
// scratch[:0]) when the batch is compressed, at most limit bytes (errors
// wrap ErrCorrupt, and ErrTooLarge past the limit). An empty batch (no
// records, as compaction leaves) has an empty section whatever its codec.
func Section(scratch, b []byte, h *Header, limit int) ([]byte, error) {
	switch {
	case h.Compression() == CodecNone:
		return b[HeaderSize:], nil
	case h.RecordCount == 0 && len(b) == HeaderSize:
		return scratch[:0], nil
	}
	return decompress(h.Compression(), scratch[:0], b[HeaderSize:], limit)
}

// CompressSection appends records (a records section, records encoded one
// after another as in a batch) to dst compressed with c, as a Builder of
// that codec would; CodecNone appends them as they are. Together with
// Section and EachRawSection it rewrites a batch with fewer records:
// copy the header, append the compressed section of the records kept, then
// set the length, record count and CRC.
func CompressSection(c Codec, dst, records []byte) ([]byte, error) {
	if c == CodecNone {
		return append(dst, records...), nil
	}
	return compress(c, dst, records)
}
