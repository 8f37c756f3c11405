package record

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultMaxDecompressedSize caps how large one batch's records section may
// grow when decompressed, unless an Iterator is given another cap. Kafka's
// default max.message.bytes is about 1 MiB compressed; 64 MiB leaves room for
// very compressible data while bounding what a hostile batch can make a
// consumer allocate.
const DefaultMaxDecompressedSize = 64 << 20

// Compression follows Kafka's choices so that its clients read our batches:
//
//   - gzip: one standard gzip member at the default level (Kafka's level 6).
//   - snappy: the xerial framing of Kafka's Java client (snappy.go); raw
//     snappy, as librdkafka and franz-go write it, is accepted on read.
//   - lz4: one LZ4 frame with independent 64 KiB blocks and no content
//     checksum, as Kafka's KafkaLZ4BlockOutputStream writes; any valid frame
//     is accepted on read.
//   - zstd: standard zstd frames at the default level (Kafka's level 3).
//
// Encoders and decoders are expensive to create, so they are pooled and
// shared by every Builder and Iterator of the process.

// compress appends the compressed form of src to dst.
func compress(c Codec, dst, src []byte) ([]byte, error) {
	switch c {
	case CodecGzip:
		return compressGzip(dst, src)
	case CodecSnappy:
		return compressSnappy(dst, src), nil
	case CodecLZ4:
		return compressLZ4(dst, src)
	case CodecZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return dst, err
		}
		return enc.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("record: no compressor for %v", c)
}

// decompress appends the decompressed form of src to dst. Malformed input
// gives an error wrapping ErrCorrupt; output beyond limit bytes gives one
// wrapping both ErrCorrupt and ErrTooLarge.
func decompress(c Codec, dst, src []byte, limit int) ([]byte, error) {
	var err error
	start := len(dst)
	switch c {
	case CodecGzip:
		dst, err = decompressGzip(dst, src, limit)
	case CodecSnappy:
		dst, err = decompressSnappy(dst, src, limit)
	case CodecLZ4:
		dst, err = decompressLZ4(dst, src, limit)
	case CodecZstd:
		dst, err = decompressZstd(dst, src, limit)
	default:
		return dst, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, int8(c))
	}
	if err == nil && len(dst)-start > limit {
		err = errOverLimit
	}
	switch {
	case err == nil:
		return dst, nil
	case errors.Is(err, errOverLimit):
		return dst, fmt.Errorf("%w: %w: %v records decompress to more than %d bytes", ErrCorrupt, ErrTooLarge, c, limit)
	case errors.Is(err, ErrCorrupt):
		return dst, err
	default:
		return dst, fmt.Errorf("%w: %v decompression: %w", ErrCorrupt, c, err)
	}
}

// errOverLimit is the internal signal that decompressed output passed the cap.
var errOverLimit = errors.New("decompressed output over limit")

// appendWriter is an io.Writer appending to a slice, so that stream encoders
// write straight into the Builder's buffer.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// readAllLimit appends everything r yields to dst, failing with errOverLimit
// once more than limit bytes have been read.
func readAllLimit(dst []byte, r io.Reader, limit int) ([]byte, error) {
	start := len(dst)
	for idle := 0; ; {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)] // let append pick the growth
		}
		// Read at most one byte past the limit: enough to detect it.
		room := min(cap(dst), start+limit+1)
		n, err := r.Read(dst[len(dst):room])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst, errOverLimit
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
		if n > 0 {
			idle = 0
		} else if idle++; idle > 100 {
			return dst, io.ErrNoProgress // a broken reader; never loop forever
		}
	}
}

// gzip

type gzipEncoder struct {
	w  *gzip.Writer
	aw appendWriter
}

type gzipDecoder struct {
	r   gzip.Reader
	src bytes.Reader
}

var (
	gzipEncoders = sync.Pool{New: func() any {
		e := &gzipEncoder{}
		e.w, _ = gzip.NewWriterLevel(&e.aw, gzip.DefaultCompression) // the level is valid
		return e
	}}
	gzipDecoders = sync.Pool{New: func() any { return new(gzipDecoder) }}
)

func compressGzip(dst, src []byte) ([]byte, error) {
	e := gzipEncoders.Get().(*gzipEncoder)
	defer gzipEncoders.Put(e)
	return streamCompress(e.w, &e.aw, dst, src)
}

// streamWriter is a pooled streaming compressor (gzip, lz4).
type streamWriter interface {
	Reset(io.Writer)
	io.WriteCloser
}

// streamCompress appends src compressed by w to dst, through aw.
func streamCompress(w streamWriter, aw *appendWriter, dst, src []byte) ([]byte, error) {
	aw.b = dst
	w.Reset(aw)
	_, err := w.Write(src)
	if err == nil {
		err = w.Close()
	}
	dst, aw.b = aw.b, nil
	return dst, err
}

func decompressGzip(dst, src []byte, limit int) ([]byte, error) {
	d := gzipDecoders.Get().(*gzipDecoder)
	defer gzipDecoders.Put(d)
	d.src.Reset(src)
	defer d.src.Reset(nil)
	if err := d.r.Reset(&d.src); err != nil {
		return dst, err
	}
	return readAllLimit(dst, &d.r, limit)
}

// lz4

type lz4Encoder struct {
	w  *lz4.Writer
	aw appendWriter
}

type lz4Decoder struct {
	r   *lz4.Reader
	src bytes.Reader
}

var (
	lz4Encoders = sync.Pool{New: func() any {
		e := &lz4Encoder{w: lz4.NewWriter(nil)}
		// Valid constant options on a new Writer cannot fail.
		_ = e.w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false), lz4.ConcurrencyOption(1))
		return e
	}}
	lz4Decoders = sync.Pool{New: func() any {
		d := &lz4Decoder{r: lz4.NewReader(nil)}
		_ = d.r.Apply(lz4.ConcurrencyOption(1))
		return d
	}}
)

func compressLZ4(dst, src []byte) ([]byte, error) {
	e := lz4Encoders.Get().(*lz4Encoder)
	defer lz4Encoders.Put(e)
	return streamCompress(e.w, &e.aw, dst, src)
}

func decompressLZ4(dst, src []byte, limit int) ([]byte, error) {
	d := lz4Decoders.Get().(*lz4Decoder)
	defer lz4Decoders.Put(d)
	d.src.Reset(src)
	defer d.src.Reset(nil)
	d.r.Reset(&d.src)
	return readAllLimit(dst, d.r, limit)
}

// zstd

// zstdEncoder is shared: EncodeAll is safe for concurrent use and keeps its
// own pool of encoder states.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
})

// zstdDecoders holds one shared decoder per output cap (in practice one or
// two caps per process). DecodeAll is safe for concurrent use, and a decoder
// built WithDecoderMaxMemory stops as soon as its output passes the cap,
// whether or not the frame declares its size.
var zstdDecoders sync.Map // int -> *zstd.Decoder

func zstdDecoder(limit int) (*zstd.Decoder, error) {
	if d, ok := zstdDecoders.Load(limit); ok {
		return d.(*zstd.Decoder), nil
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(uint64(limit)), zstd.WithDecoderConcurrency(0))
	if err != nil {
		return nil, err
	}
	if prev, loaded := zstdDecoders.LoadOrStore(limit, d); loaded {
		d.Close()
		return prev.(*zstd.Decoder), nil
	}
	return d, nil
}

func decompressZstd(dst, src []byte, limit int) ([]byte, error) {
	d, err := zstdDecoder(limit)
	if err != nil {
		return dst, err
	}
	out, err := d.DecodeAll(src, dst)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return dst, errOverLimit
	}
	if err != nil {
		return dst, err
	}
	return out, nil
}
