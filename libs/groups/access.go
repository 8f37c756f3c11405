package groups

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sluicemq/sluice/libs/cluster"
)

// NeedOf is what a request to /v1/groups... needs of its principal, the
// same rule at the offsets service (certificate principals) and at the
// frontends (token principals), after Kafka's group and topic READ:
//
//   - a heartbeat, or a classic join: consume on every topic it subscribes
//     to (a classic join's topics are those its consumer protocols name);
//   - other classic requests: consume on some topic;
//   - a commit: consume on every topic it commits;
//   - committed offsets of a topic, a reset or a deletion of them: consume
//     on it;
//   - listing groups, describing one, and offsets without a topic:
//     consume on some topic;
//   - deleting a group: an admin, or a delete ACL on it (Kafka's DELETE on
//     the group);
//   - and for a request about one group, that the principal may use it
//     (cluster.Snapshot.AllowedResource: its group ACLs, once it has one).
//
// topic is the request's topic query parameter as the handler reads it. A
// body that does not parse needs consume on some topic; the handler rejects
// it afterwards. What a group's own topics require is GroupTopics' part.
func NeedOf(method, path, topic string, body []byte) cluster.Need {
	n := cluster.Need{Op: cluster.OpConsume, Group: true}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) >= 3 {
		n.GroupName = cluster.PathName(parts[2])
	}
	switch {
	case len(parts) == 3 && method == http.MethodDelete:
		return cluster.Need{DeleteGroup: true, GroupName: n.GroupName}
	case len(parts) == 5 && parts[3] == "classic" && parts[4] == "join":
		var req JoinRequest
		if json.Unmarshal(body, &req) == nil {
			for _, p := range req.Protocols {
				n.Topics = append(n.Topics, p.Topics...)
			}
		}
	case len(parts) != 4:
	case parts[3] == "heartbeat":
		var req HeartbeatRequest
		if json.Unmarshal(body, &req) == nil {
			n.Topics = req.Topics
		}
	case parts[3] == "offsets" && method == http.MethodPost:
		var req CommitRequest
		if json.Unmarshal(body, &req) == nil {
			for _, o := range req.Offsets {
				n.Topics = append(n.Topics, o.Topic)
			}
		}
	case parts[3] == "offsets":
		if topic != "" {
			n.Topics = []string{topic}
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
