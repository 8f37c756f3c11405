package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// maxSendfileChunk bounds one sendfile(2) call.
const maxSendfileChunk = 1 << 30

// errShortFile is returned when the file ends before the range was sent (it was
// truncated under the reader); the frame on the socket is then incomplete and
// the connection must be closed.
var errShortFile = errors.New("sendfile: file ended before the range was sent")

// sendFile copies n bytes of f starting at off to the socket with sendfile(2),
// using an explicit offset so the file's shared position is never moved. It
// waits for the socket to become writable through the runtime's poller, so the
// connection's write deadline applies.
func sendFile(conn *net.TCPConn, f *os.File, off, n int64) error {
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
						sendErr = errShortFile
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

// copyFile is the fallback for connections that are not plain TCP (none today;
// TLS would need it): a positioned read and write of the range.
func copyFile(w io.Writer, f *os.File, off, n int64) error {
	_, err := io.Copy(w, io.NewSectionReader(f, off, n))
	return err
}

// writeMore writes p to the socket with MSG_MORE, so the kernel holds the
// small frame header back and sends it in one segment with the sendfile data
// that follows, instead of waking the reader for a header alone.
func writeMore(conn *net.TCPConn, p []byte) error {
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
