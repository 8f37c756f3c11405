package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"time"

	"github.com/valyala/fasthttp"
)

//go:embed templates/*.html
var templateFS embed.FS

// pageNames are the pages; each is templates/<name>.html defining "content",
// rendered inside templates/layout.html.
var pageNames = []string{"overview", "topic", "groups", "group", "sharegroups", "sharegroup", "message"}

// Menu entries a page can mark as current.
const (
	navOverview = "overview"
	navGroups   = "groups"
	navShares   = "share-groups"
)

// contentSecurityPolicy lets a page use its inline CSS and nothing else: no
// script, no image, no font, no request to any origin.
const contentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// pages holds the parsed templates by page name. It is read-only after
// parsePages.
type pages struct {
	byName map[string]*template.Template
}

// templateFuncs are the formatting helpers the templates use.
var templateFuncs = template.FuncMap{
	"bytes": formatBytes,
	"count": formatCount,
	"ids":   formatIDs,
	// num prints an offset or a lag, "—" for the -1 that means unknown.
	"num": func(n int64) string {
		if n < 0 {
			return "—"
		}
		return formatCount(n)
	},
	// size prints a log size, "—" for the -1 of a node that does not report
	// sizes.
	"size": func(n int64) string {
		if n < 0 {
			return "—"
		}
		return formatBytes(n)
	},
	"orDash": func(s string) string {
		if s == "" {
			return "—"
		}
		return s
	},
}

// parsePages parses the embedded templates.
func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(templateFuncs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parsing the %s page: %w", name, err)
		}
		p.byName[name] = t
	}
	return p, nil
}

// page is what the layout renders: the frame common to every page and one
// page's body.
type page struct {
	Title string
	// Nav is the current menu entry (navOverview or navGroups), "" for none.
	Nav string
	// RefreshSeconds is the meta refresh period; 0 leaves it out.
	RefreshSeconds int
	// Generated is when the page was built, in UTC.
	Generated string
	// Errors are the failures named in banners at the top.
	Errors []string
	Body   any
}

// newPage returns a page that reloads itself every Config.Refresh.
func (c *Console) newPage(title, nav string, b banners, body any) page {
	return page{Title: title, Nav: nav, RefreshSeconds: int(c.cfg.Refresh / time.Second),
		Generated: time.Now().UTC().Format("2006-01-02 15:04:05 UTC"), Errors: b, Body: body}
}

// message is the body of a page that only explains something.
type message struct {
	Heading string
	Text    string
}

// renderMessage answers with a page that explains a status (404, 405): it
// does not reload itself.
func (c *Console) renderMessage(ctx *fasthttp.RequestCtx, status int, heading, text string) {
	p := c.newPage(heading, "", nil, message{Heading: heading, Text: text})
	p.RefreshSeconds = 0
	c.render(ctx, status, "message", p)
}

// renderUnavailable answers 503 with the banners naming what failed; the page
// keeps reloading, so it recovers on its own once the backend answers.
func (c *Console) renderUnavailable(ctx *fasthttp.RequestCtx, title string, b banners) {
	c.render(ctx, fasthttp.StatusServiceUnavailable, "message", c.newPage(title, "", b, message{Heading: title,
		Text: "This page cannot be shown: a service it reads from did not answer (see above). It reloads on its own."}))
}

// render executes a page into a buffer and answers with it. A template that
// fails to execute is a bug: the answer is a 500 that names the page and the
// error.
func (c *Console) render(ctx *fasthttp.RequestCtx, status int, name string, p page) {
	var buf bytes.Buffer
	t := c.pages.byName[name]
	if t == nil {
		c.renderFailed(ctx, name, fmt.Errorf("no such page template"))
		return
	}
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		c.renderFailed(ctx, name, err)
		return
	}
	setSecurityHeaders(ctx)
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.SetBody(buf.Bytes())
}

func (c *Console) renderFailed(ctx *fasthttp.RequestCtx, name string, err error) {
	c.log.Error("console page failed to render", "page", name, "err", err)
	setSecurityHeaders(ctx)
	ctx.SetStatusCode(fasthttp.StatusInternalServerError)
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString(fmt.Sprintf("console: rendering the %s page failed: %v\n", name, err))
}

// setSecurityHeaders marks an answer as never cached, never sniffed, and
// allowed no asset beyond its inline CSS.
func setSecurityHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("Referrer-Policy", "no-referrer")
}
