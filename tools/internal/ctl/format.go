package ctl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/libs/record"
)

// formatter renders records with kcat's placeholders.
type formatter struct {
	parts []fmtPart
}

type fmtPart struct {
	lit string
	ph  byte // 0 for a literal
}

// parseFormat compiles a kcat-style format string.
func parseFormat(f string) (*formatter, error) {
	var out formatter
	var lit strings.Builder
	flushLit := func() {
		if lit.Len() > 0 {
			out.parts = append(out.parts, fmtPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c == '\\' && i+1 < len(f):
			i++
			switch f[i] {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case '\\':
				lit.WriteByte('\\')
			default:
				return nil, fmt.Errorf("%w: unknown escape \\%c in --format", errUsage, f[i])
			}
		case c == '%' && i+1 < len(f):
			i++
			switch f[i] {
			case 't', 'p', 'o', 'k', 's', 'T', 'h', 'S', 'K':
				flushLit()
				out.parts = append(out.parts, fmtPart{ph: f[i]})
			case '%':
				lit.WriteByte('%')
			default:
				return nil, fmt.Errorf("%w: unknown placeholder %%%c in --format", errUsage, f[i])
			}
		default:
			lit.WriteByte(c)
		}
	}
	flushLit()
	return &out, nil
}

// append renders one record.
func (f *formatter) append(dst []byte, topic string, partition int32, r *record.Record) []byte {
	for _, p := range f.parts {
		switch p.ph {
		case 0:
			dst = append(dst, p.lit...)
		case 't':
			dst = append(dst, topic...)
		case 'p':
			dst = strconv.AppendInt(dst, int64(partition), 10)
		case 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case 'k':
			dst = append(dst, r.Key...)
		case 's':
			dst = append(dst, r.Value...)
		case 'K':
			dst = strconv.AppendInt(dst, int64(lenOrNull(r.Key)), 10)
		case 'S':
			dst = strconv.AppendInt(dst, int64(lenOrNull(r.Value)), 10)
		case 'T':
			dst = strconv.AppendInt(dst, r.Timestamp, 10)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, h.Key...)
				dst = append(dst, '=')
				dst = append(dst, h.Value...)
			}
		}
	}
	return dst
}

func lenOrNull(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}
