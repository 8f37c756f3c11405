package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// topicIDFile records, in each partition directory, the ID of the topic
// incarnation the log belongs to (Kafka's partition.metadata).
const topicIDFile = seglog.PartitionMetadataFile

// checkTopicID makes dir belong to the topic with the given id: a directory left
// by an earlier topic of the same name (deleted and created again while this
// node missed it) is removed, and a new directory records the id. An empty id
// (metadata that does not assign ids) skips the check.
func checkTopicID(dir, id string) (removedStale bool, err error) {
	if id == "" {
		return false, nil
	}
	path := filepath.Join(dir, topicIDFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		got, ok := parseTopicID(b)
		if ok && got == id {
			return false, nil
		}
		if ok {
			if err := os.RemoveAll(dir); err != nil {
				return false, fmt.Errorf("removing stale partition directory %s: %w", dir, err)
			}
			removedStale = true
		}
		// An empty or unreadable file (a crash while writing it) proves
		// nothing about the data: rewrite it, never delete on its word.
	case !errors.Is(err, os.ErrNotExist):
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return removedStale, err
	}
	return removedStale, writeFileSynced(path, []byte(topicIDPrefix+id+"\n"))
}

const topicIDPrefix = "topic_id: "

// parseTopicID reads the file's id; ok is false for anything malformed.
func parseTopicID(b []byte) (string, bool) {
	s := strings.TrimSpace(string(b))
	id, found := strings.CutPrefix(s, topicIDPrefix)
	if !found || id == "" || strings.ContainsAny(id, " \n") {
		return "", false
	}
	return id, true
}

// writeFileSynced replaces path atomically and durably: write a temporary file,
// fsync it, rename it over path, fsync the directory.
func writeFileSynced(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
