package console

import (
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
)

// overview serves /console: cluster health, storage nodes and topics. It
// renders without the storage nodes' figures when they do not answer, and as
// an error page (503) only when no cluster model is known at all.
func (c *Console) overview(ctx *fasthttp.RequestCtx) {
	var b banners
	snap, _ := c.snapshot(&b)
	if snap == nil {
		c.renderUnavailable(ctx, "Overview", b)
		return
	}
	states := c.describeNodes(snap, registeredNodes(snap), "", &b)
	c.render(ctx, fasthttp.StatusOK, "overview", c.newPage("Overview", navOverview, b, buildOverview(snap, states)))
}

// topic serves /console/topics/{name}: every partition and replica of a
// topic. An unknown topic is a 404 page, unless the metadata service did not
// answer: then the topic may exist and the page is a 503 that says so.
func (c *Console) topic(ctx *fasthttp.RequestCtx, name string) {
	var b banners
	snap, current := c.snapshot(&b)
	if snap == nil {
		c.renderUnavailable(ctx, "Topic "+name, b)
		return
	}
	t, ok := snap.Topic(name)
	if !ok {
		if !current {
			b.add("Topic %s is not in the cluster model this frontend holds; it may have been created since.", name)
			c.renderUnavailable(ctx, "Topic "+name, b)
			return
		}
		c.renderMessage(ctx, fasthttp.StatusNotFound, "Topic not found", unknownTopicMessage(name))
		return
	}
	states := c.describeNodes(snap, replicaNodes(t), t.Name, &b)
	c.render(ctx, fasthttp.StatusOK, "topic", c.newPage("Topic "+t.Name, navOverview, b, buildTopic(snap, t, states)))
}

// unknownTopicMessage explains a 404 for a topic name, valid or not.
func unknownTopicMessage(name string) string {
	if err := cluster.ValidateTopicName(name); err != nil {
		return fmt.Sprintf("There is no topic %q: %v.", name, err)
	}
	return fmt.Sprintf("There is no topic named %s in this cluster.", name)
}
