package txns

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sluicemq/sluice/libs/cluster"
)

// NeedOf is what a request to the transaction coordinator's API needs of
// its principal (the offsets service checks it; a frontend relaying a Kafka
// client checks the same): a session, its partitions and its end need
// produce (on the partitions' topics when named, on some topic otherwise);
// a group's offsets in a transaction need consume on their topics, as the
// group's own commits do, and the group itself; every change needs the
// transactional id (cluster.Snapshot.AllowedResource); reading a
// transactional id's state needs describe on it (Kafka's
// DescribeTransactions; producing with it implies it), and a listing a
// known principal, shown the ids it may describe.
func NeedOf(method, path string, body []byte) cluster.Need {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if method == http.MethodGet {
		n := cluster.Need{Describe: true}
		if len(parts) == 3 {
			n.TransactionalID = cluster.PathName(parts[2])
		}
		return n
	}
	n := cluster.Need{Op: cluster.OpProduce}
	if len(parts) != 4 {
		return n
	}
	id := cluster.PathName(parts[2])
	switch parts[3] {
	case "partitions":
		var req AddPartitionsRequest
		if json.Unmarshal(body, &req) == nil {
			for _, tp := range req.Partitions {
				n.Topics = append(n.Topics, tp.Topic)
			}
		}
	case "groups":
		n = cluster.Need{Op: cluster.OpConsume, Group: true}
		var req AddGroupRequest
		if json.Unmarshal(body, &req) == nil {
			n.GroupName = req.Group
		}
	case "offsets":
		n = cluster.Need{Op: cluster.OpConsume, Group: true}
		var req CommitOffsetsRequest
		if json.Unmarshal(body, &req) == nil {
			n.GroupName = req.Group
			for _, o := range req.Offsets {
				n.Topics = append(n.Topics, o.Topic)
			}
		}
	}
	n.TransactionalID = id
	return n
}
