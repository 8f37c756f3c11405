package console

import (
	"errors"
	"fmt"
	"sort"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
)

// shareGroupList serves /console/share-groups.
func (c *Console) shareGroupList(ctx *fasthttp.RequestCtx) {
	var b banners
	if c.src.Shares == nil {
		b.add("This frontend reads no share groups")
		c.renderUnavailable(ctx, "Share groups", b)
		return
	}
	lctx, cancel := c.lookupContext()
	listing, err := c.src.Shares.List(lctx)
	cancel()
	if err != nil {
		b.add("Offsets service: list share groups: %v", err)
		c.renderUnavailable(ctx, "Share groups", b)
		return
	}
	sort.Slice(listing, func(i, j int) bool { return listing[i].Group < listing[j].Group })
	c.render(ctx, fasthttp.StatusOK, "sharegroups", c.newPage("Share groups", navShares, b, listing))
}

// shareGroupPage is /console/share-groups/{name}'s body.
type shareGroupPage struct {
	*shares.Description
	TotalLag, InFlight int64
	DeadLetterTopic    string
	Config             []configRow
}

// configRow is one configuration value.
type configRow struct{ Key, Value string }

// shareGroup serves /console/share-groups/{name}: per partition the start
// and end offsets, lag, records in flight by state and the totals, and the
// group's configuration.
func (c *Console) shareGroup(ctx *fasthttp.RequestCtx, name string) {
	if err := groups.ValidateGroupID(name); err != nil || c.src.Shares == nil {
		c.renderMessage(ctx, fasthttp.StatusNotFound, "Share group not found", fmt.Sprintf("There is no such share group: %s.", name))
		return
	}
	var b banners
	lctx, cancel := c.lookupContext()
	d, err := c.src.Shares.Describe(lctx, name)
	cancel()
	switch {
	case errors.Is(err, &protocol.Error{Code: protocol.GroupIDNotFound}):
		c.renderMessage(ctx, fasthttp.StatusNotFound, "Share group not found", fmt.Sprintf("There is no share group named %s.", name))
	case err != nil:
		b.add("Offsets service: describe share group %s: %v", name, err)
		c.renderUnavailable(ctx, "Share group "+name, b)
	default:
		c.render(ctx, fasthttp.StatusOK, "sharegroup", c.newPage("Share group "+name, navShares, b, buildShareGroup(d)))
	}
}

func buildShareGroup(d *shares.Description) shareGroupPage {
	p := shareGroupPage{Description: d, DeadLetterTopic: d.Config[shares.ConfigDeadLetterTopic]}
	for _, part := range d.Partitions {
		p.TotalLag += part.Lag
		p.InFlight += part.EndOffset - part.StartOffset
	}
	for k, v := range d.Config {
		p.Config = append(p.Config, configRow{k, v})
	}
	sort.Slice(p.Config, func(i, j int) bool { return p.Config[i].Key < p.Config[j].Key })
	return p
}
