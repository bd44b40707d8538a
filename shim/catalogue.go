package shim

import (
	"context"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/kernelclient"
)

// catalogue is the turn's published tool set. It is fetched once, when
// the first tools/list or tools/call is read, and never changes:
// listChanged is false.
type catalogue struct {
	started bool // owned by the reader goroutine
	ready   chan struct{}
	err     error // set before ready closes when the catalogue cannot be served

	tools     []hashing.Tool
	hash      string
	byName    map[string]int
	portable  map[string]int // portable name → index, -1 when two tools share it
	toolsJSON []byte         // the MCP wire array
}

func newCatalogue() *catalogue { return &catalogue{ready: make(chan struct{})} }

// start begins the fetch unless it has begun. Only the reader goroutine
// calls it.
func (c *catalogue) start(ctx context.Context, k *kernelclient.Client, log zerolog.Logger) {
	if !c.started {
		c.started = true
		go c.fetch(ctx, k, log)
	}
}

func (c *catalogue) fetch(ctx context.Context, k *kernelclient.Client, log zerolog.Logger) {
	defer close(c.ready)
	tools, hash, err := k.Catalogue(ctx)
	if err != nil {
		c.err = err
		log.Error().Err(err).Msg("the catalogue cannot be served")
		return
	}
	c.tools, c.hash = tools, hash
	c.byName = make(map[string]int, len(tools))
	c.portable = make(map[string]int, len(tools))
	// Room for the MCP array up front, generously: a 512-tool catalogue is
	// half a megabyte, and regrowing it would copy that and zero the new
	// capacity. Room to spare costs nothing: make leaves memory fresh from
	// the operating system untouched until it is written.
	size := 2
	for _, t := range tools {
		size += len(t.Name) + 2*len(t.Description) + len(t.InputSchema) + len(t.OutputSchema) + 256
	}
	buf := append(make([]byte, 0, size), '[')
	for i, t := range tools {
		c.byName[t.Name] = i
		p := portableName(t.Name)
		if _, dup := c.portable[p]; dup {
			c.portable[p] = -1
		} else {
			c.portable[p] = i
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = hashing.AppendMCP(buf, t)
	}
	c.toolsJSON = append(buf, ']')
	log.Debug().Int("tools", len(tools)).Str("catalogHash", c.hash).Msg("catalogue ready")
}

// wait blocks until the catalogue is fetched or ctx ends.
func (c *catalogue) wait(ctx context.Context) error {
	select {
	case <-c.ready:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// portableName is the form harnesses that allow only [A-Za-z0-9_-] give a
// tool name.
func portableName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// resolve maps a called name to the canonical one: an exact match, else
// the single published tool whose portable form matches, else the name
// unchanged, so the kernel still sees (and records, and refuses) a name it
// never published. tool is nil when the name is not published.
func (c *catalogue) resolve(name string) (tool *hashing.Tool, canonical string) {
	if i, ok := c.byName[name]; ok {
		return &c.tools[i], name
	}
	if i, ok := c.portable[name]; ok && i >= 0 {
		return &c.tools[i], c.tools[i].Name
	}
	return nil, name
}
