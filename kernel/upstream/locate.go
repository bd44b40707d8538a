package upstream

import (
	"slices"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Locate returns the line and column, in the TOML document doc, of what
// err is about: the key it names in its table, or else the table's
// header. ok is false when doc does not hold that table as a [[upstream]]
// (or [[upstream.tool]]) header, for instance when it was written as an
// inline array; the loader then names the table by its number alone.
func Locate(doc []byte, err *ConfigError) (line, col int, ok bool) {
	var p unstable.Parser
	p.Reset(doc)
	// Where the parser is: in which [[upstream]] (index), in which of its
	// [[upstream.tool]] tables (-1: in the upstream itself), or elsewhere.
	up, tool := -1, -1
	inside := false
	var header unstable.Range
	found := false
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			key := keyOf(e)
			switch {
			case e.Kind == unstable.ArrayTable && slices.Equal(key, []string{"upstream"}):
				up, tool, inside = up+1, -1, true
			case e.Kind == unstable.ArrayTable && slices.Equal(key, []string{"upstream", "tool"}) && up >= 0:
				tool, inside = tool+1, true
			default:
				inside = false
			}
			if inside && up == err.Upstream && tool == err.Tool {
				header, found = firstKeyRange(e), true
			}
		case unstable.KeyValue:
			if !inside || up != err.Upstream || tool != err.Tool || err.Key == "" {
				continue
			}
			if k := keyOf(e); len(k) > 0 && k[0] == err.Key {
				s := p.Shape(firstKeyRange(e))
				return s.Start.Line, s.Start.Column, true
			}
		}
	}
	if !found {
		return 0, 0, false
	}
	s := p.Shape(header)
	return s.Start.Line, s.Start.Column, true
}

func keyOf(e *unstable.Node) []string {
	var parts []string
	it := e.Key()
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}

func firstKeyRange(e *unstable.Node) unstable.Range {
	it := e.Key()
	it.Next()
	return it.Node().Raw
}
