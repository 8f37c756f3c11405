// Package durable holds the two file-system steps that make a change
// survive a machine crash: syncing a directory after a rename or a create
// in it, and replacing a small file atomically. Services that keep their own
// state files (the Raft log store, the offsets state) use it, so the rule is
// written once.
package durable

import (
	"os"
	"path/filepath"
)

// SyncDir fsyncs a directory, which makes the creations, renames and
// removals in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteFile replaces path with data durably: it writes and fsyncs
// path+".tmp", renames it over path and syncs the directory, so a crash
// leaves either the old content or the new, never a part.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}
