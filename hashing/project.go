package hashing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sharedos/sharedos-mcp/internal/jsonlex"
)

// Definition is a kernel-side tool definition as it crosses the kernel
// socket. Only the named fields are read: whatever else the kernel keeps
// in a definition (requiredCapability, metadata, …) is never seen, so it
// can never be published.
//
// Strings may hold lone surrogates (in WTF-8, see format.go) when decoded
// by this package, so that they hash as the reference hashes them.
type Definition struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Namespace    string          `json:"namespace"`
	Source       string          `json:"source"`
	ReadWrite    string          `json:"readWrite"` // "read" | "write"
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  *Annotations    `json:"annotations,omitempty"`
}

// Annotations are the kernel's behavioural hints for a tool; nil means
// not stated.
type Annotations struct {
	ReadOnly    *bool `json:"readOnly,omitempty"`
	Destructive *bool `json:"destructive,omitempty"`
	Idempotent  *bool `json:"idempotent,omitempty"`
}

// Tool is the published projection of one tool. InputSchema and
// OutputSchema hold canonical JSON (OutputSchema is nil when the tool has
// none). Tools are built by Project; Canonical, Hash and AppendMCP rely on
// the schemas being canonical and the strings valid.
type Tool struct {
	Name, Description               string
	InputSchema, OutputSchema       []byte
	ReadOnlyHint                    bool
	DestructiveHint, IdempotentHint *bool
	Namespace, Source               string
}

// MaxTools is the most tools a catalogue may hold.
const MaxTools = 512

// Limits of the reference's schema, in UTF-16 code units.
const (
	maxNameLen        = 128
	maxDescriptionLen = 8192
	maxIdentifierLen  = 256
)

// Errors a catalogue is refused with; the error names the tool.
var (
	ErrTooManyTools  = errors.New("too many tools")
	ErrDuplicateName = errors.New("duplicate name")
)

// ValidToolName reports whether s is 1–128 characters of [A-Za-z0-9_.-].
func ValidToolName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.' || b == '-') {
			return false
		}
	}
	return true
}

// Project validates defs and returns their published projection, sorted
// by name. A catalogue with any invalid tool, a duplicate name or more
// than MaxTools tools is refused as a whole; the error names the first
// offending tool and its problem.
func Project(defs []Definition) ([]Tool, error) {
	if len(defs) > MaxTools {
		return nil, fmt.Errorf("catalogue has %d tools: %w (the limit is %d)", len(defs), ErrTooManyTools, MaxTools)
	}
	c := getProjector()
	defer putProjector(c)
	rest := 0
	for i := range defs {
		rest += len(defs[i].InputSchema) + len(defs[i].OutputSchema)
	}
	tools := make([]Tool, len(defs))
	var invalid error // the first invalid tool, reported unless a schema is unreadable
	var s schemas
	for i := range defs {
		n := len(defs[i].InputSchema) + len(defs[i].OutputSchema)
		c.reserve(n, rest)
		rest -= n
		s = schemas{}
		if err := c.schemasOf(&defs[i], &s); err != nil {
			return nil, fmt.Errorf("tool %s: %w", toolLabel(defs[i].Name, i), err)
		}
		if invalid != nil {
			continue
		}
		if err := project(&defs[i], &tools[i], c.out, &s); err != nil {
			invalid = fmt.Errorf("tool %s: %w", toolLabel(defs[i].Name, i), err)
		}
	}
	if invalid != nil {
		return nil, invalid
	}
	return sortByName(tools)
}

// arenaChunk is the most Project and ProjectRaw reserve at a time for
// canonical schemas. The tools keep the buffers the schemas were written
// in, so nothing is copied once written, and a buffer of a few pages
// wastes little at its end; in a freshly started process each page
// touched is a page fault, so writing everything once matters.
const arenaChunk = 64 << 10

// getProjector returns a pooled canonicalizer without an output buffer:
// Project and ProjectRaw write into buffers of their own (see reserve).
func getProjector() *canonicalizer {
	c := getCanonicalizer()
	c.out = nil
	return c
}

// putProjector pools c without its output, which the tools hold.
func putProjector(c *canonicalizer) {
	c.out = nil
	putCanonicalizer(c)
}

// reserve makes room in c.out for the canonical schemas of a definition
// n bytes long (they are seldom longer), out of rest bytes still to read,
// in a new buffer when the current one is full.
func (c *canonicalizer) reserve(n, rest int) {
	if cap(c.out)-len(c.out) < n {
		c.out = make([]byte, 0, max(n, min(arenaChunk, rest)))
	}
}

// schemas locates a tool's canonical schemas in c.out.
type schemas struct {
	in, out       [2]int
	hasIn, hasOut bool // given at all; a given outputSchema may be null
}

// schemasOf canonicalises d's schemas.
func (c *canonicalizer) schemasOf(d *Definition, s *schemas) error {
	var err error
	if len(bytes.TrimSpace(d.InputSchema)) > 0 {
		s.in, err = c.standaloneSchema("inputSchema", d.InputSchema)
		s.hasIn = true
	}
	if err == nil && len(bytes.TrimSpace(d.OutputSchema)) > 0 {
		s.out, err = c.standaloneSchema("outputSchema", d.OutputSchema)
		s.hasOut = true
	}
	return err
}

func (c *canonicalizer) standaloneSchema(field string, src []byte) ([2]int, error) {
	c.lx.Reset(src, ecmaScript)
	c.lx.Space()
	span, err := c.schema(field)
	if err != nil {
		return span, err
	}
	if err := c.lx.End(); err != nil {
		return span, fmt.Errorf("%s: %w", field, err)
	}
	return span, nil
}

// schema canonicalises the schema at the lexer's position, dropping
// "__proto__" keys.
func (c *canonicalizer) schema(field string) (span [2]int, err error) {
	span[0] = len(c.out)
	c.dropProto = true
	err = c.value()
	c.dropProto = false
	if err != nil {
		return span, fmt.Errorf("%s: %w", field, err)
	}
	span[1] = len(c.out)
	return span, nil
}

// sortByName sorts the projected tools by name and refuses duplicates.
func sortByName(tools []Tool) ([]Tool, error) {
	slices.SortFunc(tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(tools); i++ {
		if tools[i].Name == tools[i-1].Name {
			return nil, fmt.Errorf("tool %q: %w", tools[i].Name, ErrDuplicateName)
		}
	}
	return tools, nil
}

// toolLabel names a tool in an error: by its name when that is usable,
// else by its position.
func toolLabel(name string, i int) string {
	if ValidToolName(name) {
		return fmt.Sprintf("%q", name)
	}
	if len(name) > 40 {
		name = name[:40] + "…"
	}
	return fmt.Sprintf("#%d (name %q)", i, name)
}

// project validates d and fills t; d's schemas are already canonical in
// out at sch.
func project(d *Definition, t *Tool, out []byte, sch *schemas) error {
	if !ValidToolName(d.Name) {
		return fmt.Errorf("invalid name: want 1–%d characters of [A-Za-z0-9_.-]", maxNameLen)
	}
	t.Name = d.Name
	switch units, ok := validWTF8(d.Description); {
	case !ok:
		return errors.New("description is not valid UTF-8")
	case units == 0:
		return errors.New("description is empty")
	case units > maxDescriptionLen:
		return fmt.Errorf("description is %d UTF-16 code units long, more than %d", units, maxDescriptionLen)
	}
	t.Description = d.Description
	var err error
	if t.Namespace, err = identifier("namespace", d.Namespace); err != nil {
		return err
	}
	if t.Source, err = identifier("source", d.Source); err != nil {
		return err
	}
	var readOnly bool
	switch d.ReadWrite {
	case "read":
		readOnly = true
	case "write":
	default:
		return fmt.Errorf("readWrite is %q, want \"read\" or \"write\"", d.ReadWrite)
	}
	if a := d.Annotations; a != nil {
		if a.ReadOnly != nil {
			readOnly = *a.ReadOnly
		}
		t.DestructiveHint = cloneBool(a.Destructive)
		t.IdempotentHint = cloneBool(a.Idempotent)
	}
	t.ReadOnlyHint = readOnly

	switch {
	case !sch.hasIn:
		return errors.New("inputSchema is missing")
	case out[sch.in[0]] != '{':
		return errors.New("inputSchema is not a JSON object")
	}
	// A null outputSchema is the kernel's way of saying there is none.
	if sch.hasOut && out[sch.out[0]] != '{' && out[sch.out[0]] != 'n' {
		return errors.New("outputSchema is not a JSON object")
	}
	t.InputSchema = out[sch.in[0]:sch.in[1]:sch.in[1]]
	if sch.hasOut && out[sch.out[0]] == '{' {
		t.OutputSchema = out[sch.out[0]:sch.out[1]:sch.out[1]]
	}
	return nil
}

func cloneBool(p *bool) *bool {
	if p == nil {
		return nil
	}
	b := *p
	return &b
}

// identifier trims s as the reference's String.prototype.trim does and
// checks its length.
func identifier(field, s string) (string, error) {
	s = TrimSpace(s)
	switch units, ok := validWTF8(s); {
	case !ok:
		return "", fmt.Errorf("%s is not valid UTF-8", field)
	case units == 0:
		return "", fmt.Errorf("%s is empty", field)
	case units > maxIdentifierLen:
		return "", fmt.Errorf("%s is %d UTF-16 code units long, more than %d", field, units, maxIdentifierLen)
	}
	return s, nil
}

// isECMAScriptSpace reports whether r is WhiteSpace or LineTerminator in
// ECMAScript, the set String.prototype.trim removes. It differs from
// unicode.IsSpace: U+FEFF is in, U+0085 is out.
func isECMAScriptSpace(r rune) bool {
	switch {
	case r >= 0x09 && r <= 0x0D, r == 0x20, r == 0xA0, r == 0x1680,
		r >= 0x2000 && r <= 0x200A, r == 0x2028, r == 0x2029,
		r == 0x202F, r == 0x205F, r == 0x3000, r == 0xFEFF:
		return true
	}
	return false
}

// ProjectRaw decodes each raw kernel definition, reading only the named
// fields, then projects them as Project does.
func ProjectRaw(raws []json.RawMessage) ([]Tool, error) {
	if len(raws) > MaxTools {
		return nil, fmt.Errorf("catalogue has %d tools: %w (the limit is %d)", len(raws), ErrTooManyTools, MaxTools)
	}
	c := getProjector()
	defer putProjector(c)
	rest := 0
	for _, raw := range raws {
		rest += len(raw)
	}
	tools := make([]Tool, len(raws))
	var invalid error // the first invalid tool, reported unless a definition is unreadable
	var d Definition
	var s schemas
	for i, raw := range raws {
		c.reserve(len(raw), rest)
		rest -= len(raw)
		s = schemas{}
		if err := c.definition(raw, &d, &s); err != nil {
			return nil, fmt.Errorf("tool %s: %w", toolLabel(d.Name, i), err)
		}
		if invalid != nil {
			continue
		}
		if err := project(&d, &tools[i], c.out, &s); err != nil {
			invalid = fmt.Errorf("tool %s: %w", toolLabel(d.Name, i), err)
		}
	}
	if invalid != nil {
		return nil, invalid
	}
	return sortByName(tools)
}

// UnmarshalJSON decodes a kernel definition the way ProjectRaw does: only
// the named fields, matched case-sensitively (encoding/json would also
// accept "Name" or "NAME", which the reference does not), duplicates
// resolved as JSON.parse resolves them (the last one wins).
func (d *Definition) UnmarshalJSON(data []byte) error {
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	if err := c.definition(data, d, nil); err != nil {
		return err
	}
	// data belongs to the caller, who may reuse it.
	d.InputSchema = bytes.Clone(d.InputSchema)
	d.OutputSchema = bytes.Clone(d.OutputSchema)
	return nil
}

// definition decodes src into d. With s nil the schemas are checked for
// syntax only and alias src; otherwise they are canonicalised into c.out
// at s, in the same pass, and d's schema fields stay empty.
func (c *canonicalizer) definition(src []byte, d *Definition, s *schemas) error {
	*d = Definition{}
	c.lx.Reset(src, ecmaScript)
	c.fields = c.fields[:0]
	var name, description, namespace, source, readWrite [2]int
	err := c.eachMember(func(key []byte) error {
		var err error
		switch string(key) {
		case "name":
			name, err = c.stringField("name")
		case "description":
			description, err = c.stringField("description")
		case "namespace":
			namespace, err = c.stringField("namespace")
		case "source":
			source, err = c.stringField("source")
		case "readWrite":
			readWrite, err = c.stringField("readWrite")
		case "inputSchema":
			if s == nil {
				d.InputSchema, err = c.rawField()
			} else {
				s.in, err = c.schema("inputSchema")
				s.hasIn = true
			}
		case "outputSchema":
			if s == nil {
				d.OutputSchema, err = c.rawField()
			} else {
				s.out, err = c.schema("outputSchema")
				s.hasOut = true
			}
		case "annotations":
			d.Annotations, err = c.annotations()
		default:
			err = c.lx.Skip()
		}
		return err
	})
	// One allocation for all five strings, also when err names the tool.
	fields := string(c.fields)
	d.Name = fields[name[0]:name[1]]
	d.Description = fields[description[0]:description[1]]
	d.Namespace = fields[namespace[0]:namespace[1]]
	d.Source = fields[source[0]:source[1]]
	d.ReadWrite = fields[readWrite[0]:readWrite[1]]
	if err != nil {
		return err
	}
	if c.lx.Space(); c.lx.Pos() < len(src) {
		return c.lx.Errorf("unexpected %s after the definition", c.lx.Describe())
	}
	return nil
}

// eachMember reads the object at the lexer's position (after optional
// whitespace), calling f with each member's decoded key and the lexer at
// the member's value, which f must read.
func (c *canonicalizer) eachMember(f func(key []byte) error) error {
	l := &c.lx
	if l.Space(); l.Peek() != '{' {
		return l.Want("an object")
	}
	more, err := l.Open()
	if err != nil {
		return err
	}
	for more {
		quoted, escaped, err := l.Key()
		if err != nil {
			return err
		}
		key := quoted[1 : len(quoted)-1]
		if escaped {
			key = jsonlex.AppendUnescaped(nil, key, jsonlex.KeepSurrogates)
		}
		if err := f(key); err != nil {
			return err
		}
		if more, err = l.Next('}'); err != nil {
			return err
		}
	}
	return nil
}

// stringField appends the decoded string at the lexer's position to
// c.fields and returns where it is there.
func (c *canonicalizer) stringField(field string) (span [2]int, err error) {
	l := &c.lx
	if l.Peek() != '"' {
		return span, fmt.Errorf("%s: want a string, have %s", field, l.Describe())
	}
	raw, escaped, err := l.String()
	if err != nil {
		return span, fmt.Errorf("%s: %w", field, err)
	}
	body := raw[1 : len(raw)-1]
	span[0] = len(c.fields)
	if escaped {
		c.fields = jsonlex.AppendUnescaped(c.fields, body, jsonlex.KeepSurrogates)
	} else {
		c.fields = append(c.fields, body...)
	}
	span[1] = len(c.fields)
	return span, nil
}

func (c *canonicalizer) rawField() (json.RawMessage, error) {
	start := c.lx.Pos()
	if err := c.lx.Skip(); err != nil {
		return nil, err
	}
	end := c.lx.Pos()
	return c.lx.Src()[start:end:end], nil
}

// annotations reads the annotations member; null means none stated.
func (c *canonicalizer) annotations() (*Annotations, error) {
	if c.lx.Consume("null") {
		return nil, nil
	}
	a := new(Annotations)
	err := c.eachMember(func(key []byte) error {
		var err error
		switch string(key) {
		case "readOnly":
			a.ReadOnly, err = c.boolField("annotations.readOnly")
		case "destructive":
			a.Destructive, err = c.boolField("annotations.destructive")
		case "idempotent":
			a.Idempotent, err = c.boolField("annotations.idempotent")
		default:
			err = c.lx.Skip()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("annotations: %w", err)
	}
	return a, nil
}

// boolField reads a boolean member; null means not stated.
func (c *canonicalizer) boolField(field string) (*bool, error) {
	var b bool
	switch {
	case c.lx.Consume("true"):
		b = true
	case c.lx.Consume("false"):
	case c.lx.Consume("null"):
		return nil, nil
	default:
		return nil, fmt.Errorf("%s: want a boolean, have %s", field, c.lx.Describe())
	}
	return &b, nil
}
