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
//   - a reset or a deletion of a topic's committed offsets: consume on it;
//   - describing a group and reading its committed offsets (of one topic:
//     describe on that topic too): describe on the group, as Kafka's
//     DescribeGroups and OffsetFetch ask (cluster.Snapshot.DescribesResource:
//     using it or deleting it implies it);
//   - listing groups: a known principal (the listing shows the groups it
//     may describe);
//   - deleting a group: an admin, or a delete ACL on it (Kafka's DELETE on
//     the group);
//   - and for other requests about one group, that the principal may use
//     it (cluster.Snapshot.AllowedResource: its group ACLs, once it has one).
//
// topic is the request's topic query parameter as the handler reads it. A
// body that does not parse needs consume on some topic; the handler rejects
// it afterwards. What a group's own topics require is the offsets
// service's part: consume on each to use the group, describe to read it.
func NeedOf(method, path, topic string, body []byte) cluster.Need {
	n := cluster.Need{Op: cluster.OpConsume, Group: true}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) >= 3 {
		n.GroupName = cluster.PathName(parts[2])
	}
	switch {
	case len(parts) == 3 && method == http.MethodDelete:
		return cluster.Need{DeleteGroup: true, GroupName: n.GroupName}
	case len(parts) <= 3 && method == http.MethodGet:
		return cluster.Need{Describe: true, Group: true, GroupName: n.GroupName}
	case len(parts) == 4 && parts[3] == "offsets" && method == http.MethodGet:
		n = cluster.Need{Describe: true, Group: true, GroupName: n.GroupName}
		if topic != "" {
			n.Topics = []string{topic}
		}
	case len(parts) == 5 && parts[3] == "classic" && parts[4] == "join":
		var req JoinRequest
		if json.Unmarshal(body, &req) == nil {
			for _, p := range req.Protocols {
				n.Topics = append(n.Topics, p.Topics...)
			}
		}
	case len(parts) == 4 && method == http.MethodPost:
		n.Topics = bodyTopics(parts[3], body)
	}
	return n
}

// bodyTopics are the topics the body of a POST to /v1/groups/{group}/{op}
// names: a heartbeat's subscription, a commit's topics, the topic of a
// reset or a deletion of offsets (none for a body that does not parse).
func bodyTopics(op string, body []byte) []string {
	var topics []string
	switch op {
	case "heartbeat":
		var req HeartbeatRequest
		if json.Unmarshal(body, &req) == nil {
			topics = req.Topics
		}
	case "offsets":
		var req CommitRequest
		if json.Unmarshal(body, &req) == nil {
			for _, o := range req.Offsets {
				topics = append(topics, o.Topic)
			}
		}
	case "delete-offsets":
		var req DeleteOffsetsRequest
		if json.Unmarshal(body, &req) == nil && req.Topic != "" {
			topics = []string{req.Topic}
		}
	case "reset-offsets":
		var req ResetRequest
		if json.Unmarshal(body, &req) == nil && req.Topic != "" {
			topics = []string{req.Topic}
		}
	}
	return topics
}
