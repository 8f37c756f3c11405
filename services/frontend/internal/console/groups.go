package console

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// groupList serves /console/groups: every group with its state, members and
// total lag. When the offsets service does not answer the list, the page is a
// 503 naming it; a group it cannot describe shows without lag.
func (c *Console) groupList(ctx *fasthttp.RequestCtx) {
	var b banners
	lctx, cancel := c.lookupContext()
	listing, err := c.src.Groups.List(lctx)
	cancel()
	if err != nil {
		b.add("Offsets service: list groups: %v", err)
		c.renderUnavailable(ctx, "Consumer groups", b)
		return
	}
	names := make([]string, len(listing))
	for i, l := range listing {
		names[i] = l.Group
	}
	descs := c.describeGroups(names, &b)
	c.render(ctx, fasthttp.StatusOK, "groups", c.newPage("Consumer groups", navGroups, b, buildGroupList(listing, descs)))
}

// group serves /console/groups/{name}: a group's partitions with their lag,
// and its members. An unknown group is a 404 page; an offsets service that
// does not answer a 503 naming it.
func (c *Console) group(ctx *fasthttp.RequestCtx, name string) {
	if err := groups.ValidateGroupID(name); err != nil {
		c.renderMessage(ctx, fasthttp.StatusNotFound, "Group not found", fmt.Sprintf("There is no such group: %v.", err))
		return
	}
	var b banners
	lctx, cancel := c.lookupContext()
	d, err := c.src.Groups.Describe(lctx, name)
	cancel()
	switch {
	case errors.Is(err, &protocol.Error{Code: protocol.GroupIDNotFound}):
		c.renderMessage(ctx, fasthttp.StatusNotFound, "Group not found",
			fmt.Sprintf("There is no consumer group named %s: it has no members and no committed offsets.", name))
	case err != nil:
		b.add("Offsets service: describe group %s: %v", name, err)
		c.renderUnavailable(ctx, "Group "+name, b)
	default:
		c.render(ctx, fasthttp.StatusOK, "group", c.newPage("Group "+name, navGroups, b, buildGroup(d)))
	}
}

// groupRow is one group on /console/groups.
type groupRow struct {
	Name     string
	Protocol string // groups.ProtocolLabel
	State    string
	Members  int
	// Described is whether the offsets service described the group; the
	// fields below come from that description.
	Described  bool
	Partitions int
	Topics     string
	TotalLag   int64
}

// buildGroupList lists the groups by name with what their descriptions say.
func buildGroupList(listing []groups.Listing, descs map[string]*groups.Description) []groupRow {
	rows := make([]groupRow, 0, len(listing))
	for _, l := range listing {
		row := groupRow{Name: l.Group, Protocol: groups.ProtocolLabel(l.Protocol, l.ProtocolType), State: l.State, Members: l.Members}
		if d := descs[l.Group]; d != nil {
			row.Described, row.Partitions, row.TotalLag = true, len(d.Partitions), d.TotalLag
			var topics []string
			for _, p := range d.Partitions {
				if !slices.Contains(topics, p.Topic) {
					topics = append(topics, p.Topic)
				}
			}
			sort.Strings(topics)
			row.Topics = strings.Join(topics, ", ")
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows
}

// groupView is the body of /console/groups/{name}.
type groupView struct {
	Name       string
	Protocol   string // groups.ProtocolLabel
	State      string
	Epoch      int32
	Assignor   string
	TotalLag   int64
	Partitions []groups.PartitionLag // by topic and partition
	Members    []memberRow           // by member id
}

// memberRow is one member of a group.
type memberRow struct {
	ID         string
	ClientID   string
	Host       string
	InstanceID string
	Epoch      int32
	Topics     string
	Assignment string
	Revoking   string
}

// buildGroup orders a group's description for its page.
func buildGroup(d *groups.Description) groupView {
	v := groupView{Name: d.Group, Protocol: groups.ProtocolLabel(d.Protocol, d.ProtocolType), State: d.State, Epoch: d.GroupEpoch,
		Assignor: d.Assignor, TotalLag: d.TotalLag, Partitions: slices.Clone(d.Partitions)}
	if d.Protocol == groups.ProtocolClassic {
		v.Assignor = d.ProtocolName // the members' own assignor, run by the group's leader
	}
	sort.Slice(v.Partitions, func(i, j int) bool {
		a, b := v.Partitions[i], v.Partitions[j]
		return groups.TP{Topic: a.Topic, Partition: a.Partition}.Less(groups.TP{Topic: b.Topic, Partition: b.Partition})
	})
	for _, m := range d.Members {
		v.Members = append(v.Members, memberRow{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, InstanceID: m.InstanceID, Epoch: m.MemberEpoch,
			Topics: strings.Join(m.Topics, ", "), Assignment: formatAssignment(m.Assignment), Revoking: formatAssignment(m.Revoking)})
	}
	sort.Slice(v.Members, func(i, j int) bool { return v.Members[i].ID < v.Members[j].ID })
	return v
}

// formatAssignment prints partitions as "orders: 0, 1; payments: 3", "" when
// none.
func formatAssignment(tps []groups.TopicPartitions) string {
	var parts []string
	for _, t := range groups.Group(groups.Flatten(tps)) {
		parts = append(parts, t.Topic+": "+formatIDs(t.Partitions))
	}
	return strings.Join(parts, "; ")
}

// formatIDs prints node or partition ids as "1, 2, 3".
func formatIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}
