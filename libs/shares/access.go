package shares

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sluicemq/sluice/libs/cluster"
)

// NeedOf is what a request to /v1/share-groups... needs of its principal
// (the offsets service checks it; a frontend relaying a client checks the
// same), after Kafka's group and topic READ: acquiring needs consume on
// the topic; acknowledging, consume on every topic acknowledged; a reset,
// consume on its topic; leaving, consume on some topic; describing a
// group (its members and offsets), describe on it (Kafka's
// ShareGroupDescribe and DescribeShareGroupOffsets); listing, a known
// principal, shown the groups it may describe; configuring and deleting a
// group, an admin. A body that does not parse needs consume on some topic;
// the handler rejects it afterwards.
func NeedOf(method, path string, body []byte) cluster.Need {
	n := cluster.Need{Op: cluster.OpConsume, Group: true}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) >= 3 {
		n.GroupName = cluster.PathName(parts[2])
	}
	switch {
	case len(parts) == 3 && method == http.MethodDelete:
		return cluster.Need{Admin: true}
	case len(parts) <= 3 && method == http.MethodGet:
		return cluster.Need{Describe: true, Group: true, GroupName: n.GroupName}
	case len(parts) != 4:
	case parts[3] == "config":
		return cluster.Need{Admin: true}
	case parts[3] == "acquire":
		var req AcquireRequest
		if json.Unmarshal(body, &req) == nil && req.Topic != "" {
			n.Topics = []string{req.Topic}
		}
	case parts[3] == "acks":
		var req AckRequest
		if json.Unmarshal(body, &req) == nil {
			seen := map[string]bool{}
			for _, a := range req.Acks {
				if !seen[a.Topic] {
					seen[a.Topic] = true
					n.Topics = append(n.Topics, a.Topic)
				}
			}
		}
	case parts[3] == "delete-offsets":
		var req DeleteOffsetsRequest
		if json.Unmarshal(body, &req) == nil && req.Topic != "" {
			n.Topics = []string{req.Topic}
		}
	case parts[3] == "reset-offsets":
		var req ResetRequest
		if json.Unmarshal(body, &req) == nil && req.Topic != "" {
			n.Topics = []string{req.Topic}
		}
	}
	return n
}
