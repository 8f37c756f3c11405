// Package zerocopy sends ranges of files to sockets without copying them
// through user space: sendfile(2) at an explicit offset (so concurrent
// readers never share a file position), and MSG_MORE writes of the frame
// headers that precede them, so a header and its data leave in one segment.
// Under TLS bytes must be encrypted in user space: CopyRange does that with
// positioned reads into pooled buffers.
package zerocopy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// maxSendfileChunk bounds one sendfile(2) call.
const maxSendfileChunk = 1 << 30

// ErrShortFile is returned when the file ends before the range was sent (it was
// truncated under the reader); the frame on the socket is then incomplete and
// the connection must be closed.
var ErrShortFile = errors.New("sendfile: file ended before the range was sent")

// SendFile copies n bytes of f starting at off to the socket with sendfile(2),
// using an explicit offset so the file's shared position is never moved. It
// waits for the socket to become writable through the runtime's poller, so the
// connection's write deadline applies.
func SendFile(conn *net.TCPConn, f *os.File, off, n int64) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	fc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	ctlErr := fc.Control(func(infd uintptr) {
		for n > 0 && sendErr == nil {
			werr := rc.Write(func(outfd uintptr) bool {
				for n > 0 {
					chunk := n
					if chunk > maxSendfileChunk {
						chunk = maxSendfileChunk
					}
					m, err := syscall.Sendfile(int(outfd), int(infd), &off, int(chunk))
					if m > 0 {
						n -= int64(m)
					}
					switch {
					case err == syscall.EAGAIN:
						return false // wait until the socket is writable
					case err == syscall.EINTR:
						continue
					case err != nil:
						sendErr = fmt.Errorf("sendfile: %w", err)
						return true
					case m == 0:
						sendErr = ErrShortFile
						return true
					}
				}
				return true
			})
			if werr != nil && sendErr == nil {
				sendErr = werr
			}
		}
	})
	if ctlErr != nil {
		return ctlErr
	}
	return sendErr
}

// copyBufs are CopyRange's buffers: the frame header and up to 256 KiB of
// records per write, so a TLS connection writes few, full records.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// CopyRange writes the frame header and then n bytes of f from off through
// w (a TLS connection): positioned reads into a pooled buffer, so the file's
// shared position never moves.
func CopyRange(w io.Writer, prefix []byte, f *os.File, off, n int64) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := (*bp)[:0]
	buf = append(buf, prefix...)
	for first := true; n > 0 || first; first = false {
		room := int64(cap(buf) - len(buf))
		chunk := min(n, room)
		m, err := f.ReadAt(buf[len(buf):len(buf)+int(chunk)], off)
		if int64(m) < chunk {
			if err == nil || errors.Is(err, io.EOF) {
				err = ErrShortFile
			}
			return err
		}
		buf = buf[:len(buf)+m]
		if _, err := w.Write(buf); err != nil {
			return err
		}
		off, n, buf = off+int64(m), n-int64(m), buf[:0]
	}
	return nil
}

// WriteMore writes p to the socket with MSG_MORE, so the kernel holds the
// small frame header back and sends it in one segment with the sendfile data
// that follows, instead of waking the reader for a header alone.
func WriteMore(conn *net.TCPConn, p []byte) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	werr := rc.Write(func(fd uintptr) bool {
		for len(p) > 0 {
			n, err := syscall.SendmsgN(int(fd), p, nil, nil, syscall.MSG_MORE)
			if n > 0 {
				p = p[n:]
			}
			switch {
			case err == syscall.EAGAIN:
				return false
			case err == syscall.EINTR:
				continue
			case err != nil:
				sendErr = fmt.Errorf("send header: %w", err)
				return true
			}
		}
		return true
	})
	if werr != nil {
		return werr
	}
	return sendErr
}
