package record

import (
	"encoding/binary"
	"fmt"
)

// Control batches are Kafka's transaction markers: a batch with the control
// and transactional attributes, the producer id and epoch of the
// transaction it ends, no sequence, and one uncompressed record whose
//
//	key    is  version int16 (0) | type int16 (0 abort, 1 commit)
//	value  is  version int16 (0) | coordinator epoch int32
//
// (Kafka's ControlRecordType and EndTransactionMarker). Readers skip control
// batches; a read_committed reader learns from them which transactions were
// aborted. Kafka readers accept a higher key or value version with extra
// bytes after the known fields, and so does ParseMarker.

// ControlType is a control record's type.
type ControlType int16

// The control record types that end a transaction.
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "abort"
	case ControlCommit:
		return "commit"
	}
	return fmt.Sprintf("control type %d", int16(t))
}

// Marker is what a transaction marker says.
type Marker struct {
	Type             ControlType
	CoordinatorEpoch int32
}

// controlKeySize and controlValueSize are the version-0 encodings' sizes.
const (
	controlKeySize   = 4
	controlValueSize = 6
)

// BuildMarker returns the control batch ending producer pid's transaction
// at epoch with m, timestamped ts (milliseconds). Its base offset is 0; the
// leader stamps it.
func BuildMarker(pid int64, epoch int16, m Marker, ts int64) ([]byte, error) {
	if m.Type != ControlAbort && m.Type != ControlCommit {
		return nil, fmt.Errorf("record: a transaction marker is an abort or a commit, not %v", m.Type)
	}
	key := binary.BigEndian.AppendUint16(make([]byte, 2, controlKeySize), uint16(m.Type))
	value := binary.BigEndian.AppendUint32(make([]byte, 2, controlValueSize), uint32(m.CoordinatorEpoch))
	b := NewBuilder(CodecNone)
	b.SetProducer(pid, epoch, NoSequence)
	b.Append(Record{Timestamp: ts, Key: key, Value: value})
	batch, err := b.Build()
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint16(batch[offAttributes:], attrControl|attrTransactional)
	SealBatch(batch, 1)
	return batch, nil
}

// ParseMarker reads the marker of the control batch b (a whole batch whose
// header h was validated). An abort or commit record is a marker; a control
// batch of another type, or one that is not exactly one well-formed record,
// is an error wrapping ErrCorrupt.
func ParseMarker(b []byte, h *Header) (Marker, error) {
	if !h.IsControl() {
		return Marker{}, corruptf("batch at offset %d is not a control batch", h.BaseOffset)
	}
	if h.RecordCount != 1 {
		return Marker{}, corruptf("control batch at offset %d has %d records, want 1", h.BaseOffset, h.RecordCount)
	}
	var key, value []byte
	err := EachRaw(b, h, func(r RawRecord) { key, value = r.Key, r.Value })
	switch {
	case err != nil:
		return Marker{}, err
	case len(key) < controlKeySize:
		return Marker{}, corruptf("control record key of %d bytes, want at least %d", len(key), controlKeySize)
	}
	be := binary.BigEndian
	if v := int16(be.Uint16(key)); v < 0 {
		return Marker{}, corruptf("control record key version %d", v)
	}
	m := Marker{Type: ControlType(be.Uint16(key[2:]))}
	if m.Type != ControlAbort && m.Type != ControlCommit {
		return Marker{}, corruptf("control record of unknown type %d", int16(m.Type))
	}
	if len(value) < controlValueSize {
		return Marker{}, corruptf("transaction marker value of %d bytes, want at least %d", len(value), controlValueSize)
	}
	if v := int16(be.Uint16(value)); v < 0 {
		return Marker{}, corruptf("transaction marker value version %d", v)
	}
	m.CoordinatorEpoch = int32(be.Uint32(value[2:]))
	return m, nil
}
