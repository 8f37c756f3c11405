package record

// RawRecord is one record of an uncompressed batch as it is stored.
type RawRecord struct {
	Offset    int64
	Timestamp int64
	Key       []byte // nil for a null key; aliases the batch
	Value     []byte // nil for a null value; aliases the batch
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
	prevDelta := int32(-1)
	p := 0
	for range h.RecordCount {
		if p > len(section) {
			return corruptf("%d records in %d bytes", h.RecordCount, len(section))
		}
		r, n, err := rawRecord(section[p:], h, &prevDelta)
		if err != nil {
			return err
		}
		r.Bytes = section[p : p+n]
		fn(r)
		p += n
	}
	if p != len(section) {
		return corruptf("%d bytes after the last record", len(section)-p)
	}
	return nil
}

// rawRecord decodes the record at the start of b as recordDecoder.decode
// does, with the same checks, but keeps only what RawRecord holds and
// allocates nothing (header keys are checked, not copied). It returns the
// record and its encoded size; *prevDelta is the previous record's offset
// delta (-1 before the first).
func rawRecord(b []byte, h *Header, prevDelta *int32) (RawRecord, int, error) {
	length, n := readVarint(b)
	if n <= 0 {
		return RawRecord{}, 0, badVarint("record length", n)
	}
	if length < 1 || int(length) > len(b)-n {
		return RawRecord{}, 0, corruptf("record length %d with %d bytes left", length, len(b)-n)
	}
	body := b[n : n+int(length)]
	p := 1 // attributes: unused by Kafka, ignored
	tsDelta, m := readVarlong(body[p:])
	if m <= 0 {
		return RawRecord{}, 0, badVarint("timestamp delta", m)
	}
	p += m
	offDelta, m := readVarint(body[p:])
	if m <= 0 {
		return RawRecord{}, 0, badVarint("offset delta", m)
	}
	p += m
	if offDelta <= *prevDelta || offDelta > h.LastOffsetDelta {
		return RawRecord{}, 0, corruptf("offset delta %d after %d, last offset delta %d", offDelta, *prevDelta, h.LastOffsetDelta)
	}
	*prevDelta = offDelta
	key, p, err := readBytesField(body, p, "key")
	if err != nil {
		return RawRecord{}, 0, err
	}
	value, p, err := readBytesField(body, p, "value")
	if err != nil {
		return RawRecord{}, 0, err
	}
	if p, err = skipHeaders(body, p); err != nil {
		return RawRecord{}, 0, err
	}
	if p != len(body) {
		return RawRecord{}, 0, corruptf("record length %d but fields end at %d", len(body), p)
	}
	ts := h.BaseTimestamp + tsDelta
	if h.LogAppendTime() {
		ts = h.MaxTimestamp
	}
	return RawRecord{Offset: h.BaseOffset + int64(offDelta), Timestamp: ts, Key: key, Value: value, NullValue: value == nil}, n + len(body), nil
}

// skipHeaders checks a record's header count and headers from body[p:] as
// recordDecoder.readHeaders does, without decoding them, and returns the
// position after them.
func skipHeaders(body []byte, p int) (int, error) {
	count, m := readVarint(body[p:])
	if m <= 0 {
		return p, badVarint("header count", m)
	}
	p += m
	if count < 0 || int(count) > (len(body)-p)/2 {
		return p, corruptf("header count %d with %d bytes left", count, len(body)-p)
	}
	for i := range int(count) {
		klen, m := readVarint(body[p:])
		if m <= 0 {
			return p, badVarint("header key length", m)
		}
		p += m
		if klen < 0 || int(klen) > len(body)-p {
			return p, corruptf("header %d key length %d with %d bytes left", i, klen, len(body)-p)
		}
		p += int(klen)
		var err error
		if _, p, err = readBytesField(body, p, "header value"); err != nil {
			return p, err
		}
	}
	return p, nil
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
