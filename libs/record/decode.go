package record

// recordDecoder decodes the records of one batch's (decompressed) records
// section, checking every length against the bytes present. It appends the
// records from start to end to recs, their headers to hdrs. With ranged,
// the records outside start..end are only framed (length and offset delta),
// not decoded.
type recordDecoder struct {
	h         *Header
	prevDelta int32 // offset delta of the previous record; deltas must rise
	start     int64
	end       int64
	ranged    bool
	recs      []Record
	hdrs      []RecordHeader
}

// decode decodes the record at the start of b and returns its encoded size.
// Errors wrap ErrCorrupt.
func (d *recordDecoder) decode(b []byte) (int, error) {
	length, n := readVarint(b)
	if n <= 0 {
		return 0, badVarint("record length", n)
	}
	if length < 1 || int(length) > len(b)-n {
		return 0, corruptf("record length %d with %d bytes left", length, len(b)-n)
	}
	body := b[n : n+int(length)]
	p := 1 // attributes: unused by Kafka, ignored

	tsDelta, m := readVarlong(body[p:])
	if m <= 0 {
		return 0, badVarint("timestamp delta", m)
	}
	p += m
	offDelta, m := readVarint(body[p:])
	if m <= 0 {
		return 0, badVarint("offset delta", m)
	}
	p += m
	if offDelta <= d.prevDelta || offDelta > d.h.LastOffsetDelta {
		return 0, corruptf("offset delta %d after %d, last offset delta %d", offDelta, d.prevDelta, d.h.LastOffsetDelta)
	}
	d.prevDelta = offDelta
	offset := d.h.BaseOffset + int64(offDelta)
	if d.ranged && (offset < d.start || offset > d.end) {
		return n + len(body), nil
	}

	key, p, err := readBytesField(body, p, "key")
	if err != nil {
		return 0, err
	}
	value, p, err := readBytesField(body, p, "value")
	if err != nil {
		return 0, err
	}
	hdrStart := len(d.hdrs)
	if p, err = d.readHeaders(body, p); err != nil {
		return 0, err
	}
	if p != len(body) {
		return 0, corruptf("record length %d but fields end at %d", len(body), p)
	}

	if offset < d.start || offset > d.end {
		d.hdrs = d.hdrs[:hdrStart]
		return n + len(body), nil
	}
	ts := d.h.BaseTimestamp + tsDelta
	if d.h.LogAppendTime() {
		ts = d.h.MaxTimestamp
	}
	var headers []RecordHeader
	if len(d.hdrs) > hdrStart {
		headers = d.hdrs[hdrStart:len(d.hdrs):len(d.hdrs)]
	}
	d.recs = append(d.recs, Record{Offset: offset, Timestamp: ts, Key: key, Value: value, Headers: headers})
	return n + len(body), nil
}

// readHeaders decodes a record's header count and headers from body[p:],
// appending them to d.hdrs, and returns the position after them.
func (d *recordDecoder) readHeaders(body []byte, p int) (int, error) {
	count, m := readVarint(body[p:])
	if m <= 0 {
		return p, badVarint("header count", m)
	}
	p += m
	// Each header takes at least two bytes (two one-byte lengths).
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
		key := string(body[p : p+int(klen)])
		p += int(klen)
		var value []byte
		var err error
		if value, p, err = readBytesField(body, p, "header value"); err != nil {
			return p, err
		}
		d.hdrs = append(d.hdrs, RecordHeader{Key: key, Value: value})
	}
	return p, nil
}

// readBytesField decodes a nullable length-prefixed field from body[p:]. It
// returns nil for length -1, otherwise a capacity-limited slice of body, and
// the position after the field.
func readBytesField(body []byte, p int, what string) ([]byte, int, error) {
	n, m := readVarint(body[p:])
	if m <= 0 {
		return nil, p, badVarint(what+" length", m)
	}
	p += m
	switch {
	case n == -1:
		return nil, p, nil
	case n < -1 || int(n) > len(body)-p:
		return nil, p, corruptf("%s length %d with %d bytes left", what, n, len(body)-p)
	}
	end := p + int(n)
	return body[p:end:end], end, nil
}

// badVarint describes a failed varint read: n is 0 when the bytes ran out and
// negative when the encoding was too long.
func badVarint(what string, n int) error {
	if n == 0 {
		return corruptf("%s: varint runs past the end", what)
	}
	return corruptf("%s: varint too long", what)
}
