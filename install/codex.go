package install

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// codexFormat is Codex's config.toml. Our entry is the table
// [mcp_servers.sharedos] (a further one [mcp_servers.sharedos-NAME]); it
// is replaced, appended or cut as a block of lines so the rest of the
// file — comments included — stays as it was.
// go-toml parses the file before and after the edit: before to refuse a
// broken file, after to prove the edit produced the entry it meant to.
type codexFormat struct{}

// codexKey is the table of the entry named name. Entry names are bare
// TOML keys (EntryName).
func codexKey(name string) []string { return []string{"mcp_servers", name} }

func codexBlock(name string, e Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[mcp_servers.%s]\n", name)
	fmt.Fprintf(&b, "command = %s\n", tomlString(e.Command))
	args := make([]string, len(e.Args))
	for i, a := range e.Args {
		args[i] = tomlString(a)
	}
	fmt.Fprintf(&b, "args = [%s]\n", strings.Join(args, ", "))
	b.WriteString("required = true\n")
	fmt.Fprintf(&b, "startup_timeout_sec = %d\n", StartupTimeoutSec)
	fmt.Fprintf(&b, "tool_timeout_sec = %d\n", ToolTimeoutSec)
	// Without it, `codex exec` refuses every call to this server itself
	// ("requires approval, but approval policy is never"); the kernel is
	// the one that decides.
	b.WriteString("default_tools_approval_mode = \"approve\"\n")
	return b.String()
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// exprKind is what a top-level TOML expression is.
type exprKind int

const (
	exprKeyValue   exprKind = iota // key = value
	exprTable                      // [table]
	exprArrayTable                 // [[array table]]
)

// tomlExpr is one top-level expression: a [table] or [[array table]]
// header or a key = value line, as the span of whole lines it occupies.
type tomlExpr struct {
	kind       exprKind
	key        []string
	start, end int
}

// tomlDecode parses src fully, so that a broken file is refused with its
// position before anything is cut out of it.
func tomlDecode(src []byte) (map[string]any, error) {
	var m map[string]any
	if err := toml.Unmarshal(src, &m); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			return nil, &ParseError{Line: line, Column: col, Msg: de.Error()}
		}
		return nil, err
	}
	return m, nil
}

// tomlExprs lists src's top-level expressions. src must already have
// passed tomlDecode. It is the one place that uses go-toml's unstable
// parser, for the byte offsets of keys and values that its stable API
// does not give; TestTOMLExprsSpans pins the offsets it relies on.
func tomlExprs(src []byte) ([]tomlExpr, error) {
	var p unstable.Parser
	p.Reset(src)
	var out []tomlExpr
	for p.NextExpression() {
		n := p.Expression()
		var x tomlExpr
		switch n.Kind {
		case unstable.KeyValue:
			x.kind = exprKeyValue
		case unstable.Table:
			x.kind = exprTable
		case unstable.ArrayTable:
			x.kind = exprArrayTable
		default:
			continue
		}
		it := n.Key()
		last := 0
		for it.Next() {
			k := it.Node()
			x.key = append(x.key, string(k.Data))
			if len(x.key) == 1 {
				x.start = int(k.Raw.Offset)
			}
			last = int(k.Raw.Offset + k.Raw.Length)
		}
		if n.Kind == unstable.KeyValue {
			last = int(n.Raw.Offset + n.Raw.Length)
		}
		x.start = bytes.LastIndexByte(src[:x.start], '\n') + 1
		x.end = lineEnd(src, last)
		out = append(out, x)
	}
	if err := p.Error(); err != nil {
		return nil, err
	}
	return out, nil
}

// lineEnd returns the offset just past the newline ending the line that
// holds offset (or len(src)).
func lineEnd(src []byte, offset int) int {
	if i := bytes.IndexByte(src[offset:], '\n'); i >= 0 {
		return offset + i + 1
	}
	return len(src)
}

// tableBlock returns the span of the table at exprs[i]: its header and
// its key/value lines, without the blank and comment lines that precede
// the next header (those describe what follows).
func tableBlock(exprs []tomlExpr, i int) (start, end int) {
	start, end = exprs[i].start, exprs[i].end
	for _, x := range exprs[i+1:] {
		if x.kind != exprKeyValue {
			break
		}
		end = x.end
	}
	return start, end
}

func isTable(x tomlExpr, key []string) bool {
	return x.kind == exprTable && slices.Equal(x.key, key)
}

func codexCommand(m map[string]any, name string) (found bool, command string) {
	found, e := codexEntry(m, name)
	return found, e.Command
}

func codexEntry(m map[string]any, name string) (found bool, e Entry) {
	servers, _ := m["mcp_servers"].(map[string]any)
	entry, ok := servers[name]
	if !ok {
		return false, Entry{}
	}
	t, _ := entry.(map[string]any)
	e.Command, _ = t["command"].(string)
	args, _ := t["args"].([]any)
	for _, a := range args {
		if s, ok := a.(string); ok {
			e.Args = append(e.Args, s)
		}
	}
	return true, e
}

func (codexFormat) merge(src []byte, name string, e Entry) ([]byte, error) {
	key := codexKey(name)
	m, err := tomlDecode(src)
	if err != nil {
		return nil, err
	}
	exprs, err := tomlExprs(src)
	if err != nil {
		return nil, err
	}
	block := codexBlock(name, e)
	var out []byte
	if i := slices.IndexFunc(exprs, func(x tomlExpr) bool { return isTable(x, key) }); i >= 0 {
		start, end := tableBlock(exprs, i)
		if end == len(src) && !bytes.HasSuffix(src, []byte("\n")) {
			block = strings.TrimSuffix(block, "\n")
		}
		out = splice(src, start, end, block)
	} else {
		if found, _ := codexCommand(m, name); found {
			return nil, fmt.Errorf("mcp_servers.%s is defined outside a [mcp_servers.%s] table: %w", name, name, ErrUnsupportedLayout)
		}
		out = append([]byte{}, src...)
		if len(bytes.TrimSpace(out)) > 0 {
			if !bytes.HasSuffix(out, []byte("\n")) {
				out = append(out, '\n')
			}
			out = append(out, '\n')
		}
		out = append(out, block...)
	}
	after, err := tomlDecode(out)
	if err != nil {
		return nil, fmt.Errorf("the edit would not parse (%v): %w", err, ErrUnsupportedLayout)
	}
	if _, cmd := codexCommand(after, name); cmd != e.Command {
		return nil, fmt.Errorf("the edit does not read back: %w", ErrUnsupportedLayout)
	}
	return out, nil
}

// remove cuts [mcp_servers.sharedos] and its sub-tables
// ([mcp_servers.sharedos.env], …): they only mean something as part of
// our entry. The blank line install put before the table goes too.
func (codexFormat) remove(src []byte, name string) ([]byte, error) {
	key := codexKey(name)
	m, err := tomlDecode(src)
	if err != nil {
		return nil, err
	}
	exprs, err := tomlExprs(src)
	if err != nil {
		return nil, err
	}
	out := src
	found := false
	// From the last table up, so earlier offsets stay valid.
	for i := len(exprs) - 1; i >= 0; i-- {
		x := exprs[i]
		if x.kind == exprKeyValue || len(x.key) < len(key) || !slices.Equal(x.key[:len(key)], key) {
			continue
		}
		start, end := tableBlock(exprs, i)
		if start >= 2 && out[start-1] == '\n' && out[start-2] == '\n' {
			start--
		}
		out = splice(out, start, end, "")
		found = found || isTable(x, key)
	}
	if f, _ := codexCommand(m, name); f && !found {
		return nil, fmt.Errorf("mcp_servers.%s is defined outside a [mcp_servers.%s] table: %w", name, name, ErrUnsupportedLayout)
	}
	if _, err := tomlDecode(out); err != nil {
		return nil, fmt.Errorf("the edit would not parse (%v): %w", err, ErrUnsupportedLayout)
	}
	return out, nil
}

func (codexFormat) inspect(src []byte, name string) (bool, Entry, error) {
	m, err := tomlDecode(src)
	if err != nil {
		return false, Entry{}, err
	}
	found, e := codexEntry(m, name)
	return found, e, nil
}

func (codexFormat) names(src []byte) ([]string, error) {
	m, err := tomlDecode(src)
	if err != nil {
		return nil, err
	}
	servers, _ := m["mcp_servers"].(map[string]any)
	var out []string
	for name := range servers {
		if isOurs(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}
