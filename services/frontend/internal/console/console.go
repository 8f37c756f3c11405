package console

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
)

// Prefix is the path under which the console is served.
const Prefix = "/console"

// Metadata is the cluster model as the console reads it; *metacache.Cache is
// one. Both methods are called from request goroutines.
type Metadata interface {
	// Snapshot returns the snapshot held now, nil before the first one. The
	// snapshot is shared and must not be modified.
	Snapshot() *cluster.Snapshot
	// RefreshOlder returns the held snapshot when the metadata service
	// answered less than maxAge ago, else fetches the current one; ctx
	// bounds the wait.
	RefreshOlder(ctx context.Context, maxAge time.Duration) (*cluster.Snapshot, error)
}

// Replicas asks storage nodes for the state of their replicas;
// *storageclient.Pool is one. It is called from several goroutines at once.
type Replicas interface {
	// DescribeReplicas returns the state of the replicas of topic (of every
	// topic when "") on the node at addr; ctx bounds the call.
	DescribeReplicas(ctx context.Context, addr, topic string) ([]protocol.ReplicaInfo, error)
}

// Groups is the read side of the offsets service; *groups.Client is one. It
// is called from several goroutines at once.
type Groups interface {
	// List lists the groups.
	List(ctx context.Context) ([]groups.Listing, error)
	// Describe describes a group with its members and per-partition lag; an
	// unknown group is a *protocol.Error with code GROUP_ID_NOT_FOUND.
	Describe(ctx context.Context, group string) (*groups.Description, error)
}

// Shares is the read side of the offsets service's share groups;
// *shares.Client is one. It is called from several goroutines at once.
type Shares interface {
	List(ctx context.Context) ([]shares.Listing, error)
	// Describe describes a share group; an unknown one is a
	// *protocol.Error with code GROUP_ID_NOT_FOUND.
	Describe(ctx context.Context, group string) (*shares.Description, error)
}

// Sources are the backends the console reads from. Shares may be nil: the
// share-group pages then say so.
type Sources struct {
	Metadata Metadata
	Replicas Replicas
	Groups   Groups
	Shares   Shares
}

// snapshotMaxAge is how old the cluster model on a page may be when the
// metadata service answers: the cache's watch usually keeps it younger.
const snapshotMaxAge = time.Second

// Console serves the console's pages. It is safe for concurrent use and holds
// no state of its own beyond its parsed templates.
type Console struct {
	cfg   Config
	src   Sources
	log   *slog.Logger
	pages *pages
}

// New returns a console reading from src.
func New(cfg Config, src Sources, log *slog.Logger) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src.Metadata == nil || src.Replicas == nil || src.Groups == nil {
		return nil, fmt.Errorf("console: metadata, replicas and groups sources are all required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	return &Console{cfg: cfg, src: src, log: log, pages: p}, nil
}

// Serve is the fasthttp handler of every path under Prefix (and Prefix
// itself). It answers GET and HEAD only.
func (c *Console) Serve(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Response.Header.Set("Allow", "GET, HEAD")
		c.renderMessage(ctx, fasthttp.StatusMethodNotAllowed, "Method not allowed",
			fmt.Sprintf("The console is read-only: %s is not allowed here, only GET and HEAD.", ctx.Method()))
		return
	}
	path := string(ctx.Path())
	rest, ok := strings.CutPrefix(path, Prefix)
	if !ok || (rest != "" && rest[0] != '/') {
		c.notFound(ctx, path)
		return
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] == "":
		c.overview(ctx)
	case len(parts) == 1 && parts[0] == "topics":
		ctx.Redirect(Prefix+"#topics", fasthttp.StatusFound)
	case len(parts) == 2 && parts[0] == "topics" && parts[1] != "":
		c.topic(ctx, parts[1])
	case len(parts) == 1 && parts[0] == "groups":
		c.groupList(ctx)
	case len(parts) == 2 && parts[0] == "groups" && parts[1] != "":
		c.group(ctx, parts[1])
	case len(parts) == 1 && parts[0] == "share-groups":
		c.shareGroupList(ctx)
	case len(parts) == 2 && parts[0] == "share-groups" && parts[1] != "":
		c.shareGroup(ctx, parts[1])
	default:
		c.notFound(ctx, path)
	}
}

// lookupContext returns the context of one look-up.
func (c *Console) lookupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.cfg.LookupTimeout)
}

// notFound answers a path that is no console page.
func (c *Console) notFound(ctx *fasthttp.RequestCtx, path string) {
	c.renderMessage(ctx, fasthttp.StatusNotFound, "Page not found",
		fmt.Sprintf("There is no console page at %s.", path))
}
