package install

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// deepseekFormat is DeepSeek Harness's cordis.patch.yml: a YAML sequence
// of patch rows. Ours is an `- insert:` row whose list holds one entry,
// the @deepseek-ai/dsh-mcp-client plugin with id mcp-sharedos (a further
// entry's, mcp-sharedos-NAME) — never a
// bare `- id:` row, which would patch an existing plugin instead of
// adding one. The harness spreads an insert's value into its plugin list,
// so it must be a list: a mapping there stops it at start-up (seen with
// 0.1.0-rc.8), and a row of that shape, which earlier releases of install
// wrote, is still found so that a reinstall replaces it. Our row is
// replaced, appended or cut as a block of lines; the user's rows are
// never re-serialised. yaml.v3 parses the file before the edit (a broken
// file is refused) and after it (the edit must read back as the row we
// meant).
type deepseekFormat struct{}

const deepseekPlugin = "@deepseek-ai/dsh-mcp-client"

// deepseekID is the plugin id of the entry named name.
func deepseekID(name string) string { return "mcp-" + name }

func deepseekRow(name string, e Entry, indent string) string {
	args := make([]string, len(e.Args))
	for i, a := range e.Args {
		args[i] = yamlString(a)
	}
	lines := []string{
		"- insert:",
		"    - id: " + deepseekID(name),
		"      name: '" + deepseekPlugin + "'",
		"      config:",
		"        serverName: " + name,
		"        transport: stdio",
		"        command: " + yamlString(e.Command),
		"        args: [" + strings.Join(args, ", ") + "]",
		"        failOnStartupError: true",
		"        toolCallTimeoutMs: " + strconv.Itoa(ToolTimeoutSec*1000),
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(indent + l + "\n")
	}
	return b.String()
}

// yamlString quotes s as a YAML double-quoted scalar.
func yamlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 || r == 0xfeff:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// yamlRows parses src and returns its top-level sequence's items (nil for
// an empty file).
func yamlRows(src []byte) ([]*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		pe := &ParseError{Msg: msg}
		// yaml.v3 says "line N: what" (after "yaml: "), or names the
		// line further in for unmarshal errors.
		if i := strings.Index(msg, "line "); i >= 0 {
			rest := msg[i+len("line "):]
			digits := rest[:len(rest)-len(strings.TrimLeft(rest, "0123456789"))]
			if digits != "" {
				pe.Line, _ = strconv.Atoi(digits)
				if i == 0 {
					pe.Msg = strings.TrimPrefix(rest[len(digits):], ": ")
				}
			}
		}
		return nil, pe
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil
	}
	seq := doc.Content[0]
	if seq.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("the top level is not a sequence of patch rows: %w", ErrUnsupportedLayout)
	}
	if seq.Style&yaml.FlowStyle != 0 {
		return nil, fmt.Errorf("the patch rows are a [flow] sequence: %w", ErrUnsupportedLayout)
	}
	return seq.Content, nil
}

func yamlGet(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// ourRow returns the index of the insert row of the entry named name,
// or -1.
func ourRow(items []*yaml.Node, name string) int {
	for i, it := range items {
		if ourEntry(it, name) != nil {
			return i
		}
	}
	return -1
}

// insertedEntry returns the one plugin entry row inserts: the one item
// of its insert list, or, in the shape earlier releases wrote, the insert
// mapping itself, and its id ("" when it has none). An insert list that
// holds other entries too is the user's, and not ours to replace.
func insertedEntry(row *yaml.Node) (*yaml.Node, string) {
	entry := yamlGet(row, "insert")
	if entry != nil && entry.Kind == yaml.SequenceNode && len(entry.Content) == 1 {
		entry = entry.Content[0]
	}
	if id := yamlGet(entry, "id"); id != nil && id.Kind == yaml.ScalarNode {
		return entry, id.Value
	}
	return nil, ""
}

// ourEntry returns the plugin entry of the entry named name that row
// inserts, nil when row is not that one.
func ourEntry(row *yaml.Node, name string) *yaml.Node {
	if entry, id := insertedEntry(row); id == deepseekID(name) {
		return entry
	}
	return nil
}

func rowCommand(row *yaml.Node, name string) string {
	return rowEntry(row, name).Command
}

func rowEntry(row *yaml.Node, name string) Entry {
	var e Entry
	config := yamlGet(ourEntry(row, name), "config")
	if c := yamlGet(config, "command"); c != nil && c.Kind == yaml.ScalarNode {
		e.Command = c.Value
	}
	if args := yamlGet(config, "args"); args != nil && args.Kind == yaml.SequenceNode {
		for _, a := range args.Content {
			if a.Kind == yaml.ScalarNode {
				e.Args = append(e.Args, a.Value)
			}
		}
	}
	return e
}

// lineStarts returns the offset of every line of src, plus len(src).
func lineStarts(src []byte) []int {
	starts := []int{0}
	for i, c := range src {
		if c == '\n' && i+1 < len(src) {
			starts = append(starts, i+1)
		}
	}
	return append(starts, len(src))
}

// rowSpan returns the byte span of items[i]: from its dash to its last
// line of content, leaving the blank and comment lines before the next
// row to that row.
func rowSpan(src []byte, items []*yaml.Node, i int) (start, end int) {
	starts := lineStarts(src)
	nlines := len(starts) - 1
	line := func(n int) string { return string(src[starts[n-1]:starts[n]]) } // 1-based
	first := items[i].Line
	if first > 1 && strings.TrimSpace(line(first-1)) == "-" {
		first--
	}
	last := nlines
	if i+1 < len(items) {
		last = items[i+1].Line - 1
	}
	for last > first {
		t := strings.TrimSpace(line(last))
		if t != "" && !strings.HasPrefix(t, "#") && t != "-" {
			break
		}
		last--
	}
	return starts[first-1], starts[last]
}

func (deepseekFormat) merge(src []byte, name string, e Entry) ([]byte, error) {
	items, err := yamlRows(src)
	if err != nil {
		return nil, err
	}
	var out []byte
	if i := ourRow(items, name); i >= 0 {
		start, end := rowSpan(src, items, i)
		indent, _ := lineIndent(src, start+bytes.IndexByte(src[start:], '-'))
		row := deepseekRow(name, e, indent)
		if end == len(src) && !bytes.HasSuffix(src, []byte("\n")) {
			row = strings.TrimSuffix(row, "\n")
		}
		out = splice(src, start, end, row)
	} else {
		indent := ""
		if len(items) > 0 {
			starts := lineStarts(src)
			indent, _ = lineIndent(src, starts[items[0].Line-1]+bytes.IndexByte(src[starts[items[0].Line-1]:], '-'))
		}
		out = append([]byte{}, src...)
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
		out = append(out, deepseekRow(name, e, indent)...)
	}
	after, err := yamlRows(out)
	if err != nil {
		return nil, fmt.Errorf("the edit would not parse (%v): %w", err, ErrUnsupportedLayout)
	}
	if i := ourRow(after, name); i < 0 || rowCommand(after[i], name) != e.Command {
		return nil, fmt.Errorf("the edit does not read back: %w", ErrUnsupportedLayout)
	}
	return out, nil
}

func (deepseekFormat) remove(src []byte, name string) ([]byte, error) {
	items, err := yamlRows(src)
	if err != nil {
		return nil, err
	}
	i := ourRow(items, name)
	if i < 0 {
		return src, nil
	}
	start, end := rowSpan(src, items, i)
	return splice(src, start, end, ""), nil
}

func (deepseekFormat) names(src []byte) ([]string, error) {
	items, err := yamlRows(src)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range items {
		_, id := insertedEntry(it)
		if name, ok := strings.CutPrefix(id, "mcp-"); ok && isOurs(name) {
			out = append(out, name)
		}
	}
	return out, nil
}

func (deepseekFormat) inspect(src []byte, name string) (bool, Entry, error) {
	items, err := yamlRows(src)
	if err != nil {
		return false, Entry{}, err
	}
	i := ourRow(items, name)
	if i < 0 {
		return false, Entry{}, nil
	}
	return true, rowEntry(items[i], name), nil
}
