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
		got := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b)), "topic_id:"))
		if got == id {
			return false, nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return false, fmt.Errorf("removing stale partition directory %s: %w", dir, err)
		}
		removedStale = true
	case !errors.Is(err, os.ErrNotExist):
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return removedStale, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte("topic_id: "+id+"\n"), 0o644); err != nil {
		return removedStale, err
	}
	return removedStale, os.Rename(tmp, path)
}
