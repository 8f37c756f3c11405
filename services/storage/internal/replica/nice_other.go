//go:build !linux

package replica

import "errors"

var errNoThreadPriority = errors.New("thread priorities are set on Linux only")

func lowerThreadPriority(int) error { return errNoThreadPriority }

func threadNice() (int, error) { return 0, errNoThreadPriority }
