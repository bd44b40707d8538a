package hashing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Definition is a kernel-side tool definition as it crosses the kernel
// socket. Only the named fields are read: whatever else the kernel keeps
// in a definition (requiredCapability, metadata, …) is never seen, so it
// can never be published.
//
// Strings may hold lone surrogates (see appendWTF8) when decoded by this
// package, so that they hash as the reference hashes them.
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
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	// The schemas of all tools share one allocation, sized from the input;
	// it is the caller's, so the pooled buffer is set aside meanwhile.
	pooled := c.out
	size := 0
	for i := range defs {
		size += len(defs[i].InputSchema) + len(defs[i].OutputSchema)
	}
	c.out = make([]byte, 0, size)
	defer func() { c.out = pooled }()

	tools := make([]Tool, len(defs))
	spans := make([][4]int, len(defs)) // input and output schema in c.out
	for i := range defs {
		if err := project(c, &defs[i], &tools[i], &spans[i]); err != nil {
			return nil, fmt.Errorf("tool %s: %w", toolLabel(defs[i].Name, i), err)
		}
	}
	arena := c.out
	for i := range tools {
		s := spans[i]
		tools[i].InputSchema = arena[s[0]:s[1]:s[1]]
		if s[2] < s[3] {
			tools[i].OutputSchema = arena[s[2]:s[3]:s[3]]
		}
	}
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

// project validates d and fills t, writing its schemas to c.out and
// their spans to span.
func project(c *canonicalizer, d *Definition, t *Tool, span *[4]int) error {
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

	if len(bytes.TrimSpace(d.InputSchema)) == 0 {
		return errors.New("inputSchema is missing")
	}
	span[0] = len(c.out)
	if err := c.canonicalize(d.InputSchema, true); err != nil {
		return fmt.Errorf("inputSchema: %w", err)
	}
	span[1] = len(c.out)
	if c.out[span[0]] != '{' {
		return errors.New("inputSchema is not a JSON object")
	}
	span[2], span[3] = len(c.out), len(c.out)
	if len(bytes.TrimSpace(d.OutputSchema)) > 0 {
		if err := c.canonicalize(d.OutputSchema, true); err != nil {
			return fmt.Errorf("outputSchema: %w", err)
		}
		switch c.out[span[2]] {
		case '{':
			span[3] = len(c.out)
		case 'n': // null: the kernel's way of saying there is none
			c.out = c.out[:span[2]]
		default:
			return errors.New("outputSchema is not a JSON object")
		}
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
	s = strings.TrimFunc(s, isECMAScriptSpace)
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
	defs := make([]Definition, len(raws))
	c := getCanonicalizer()
	for i, raw := range raws {
		if err := c.definition(raw, &defs[i]); err != nil {
			putCanonicalizer(c)
			return nil, fmt.Errorf("tool %s: %w", toolLabel(defs[i].Name, i), err)
		}
	}
	putCanonicalizer(c)
	return Project(defs)
}

// UnmarshalJSON decodes a kernel definition the way ProjectRaw does: only
// the named fields, matched case-sensitively (encoding/json would also
// accept "Name" or "NAME", which the reference does not), duplicates
// resolved as JSON.parse resolves them (the last one wins).
func (d *Definition) UnmarshalJSON(data []byte) error {
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	if err := c.definition(data, d); err != nil {
		return err
	}
	// data belongs to the caller, who may reuse it.
	d.InputSchema = bytes.Clone(d.InputSchema)
	d.OutputSchema = bytes.Clone(d.OutputSchema)
	return nil
}

// definition decodes src into d. The schemas are checked for syntax only
// and alias src.
func (c *canonicalizer) definition(src []byte, d *Definition) error {
	*d = Definition{}
	c.src, c.pos, c.depth = src, 0, 0
	err := c.eachMember(func(key []byte) error {
		var err error
		switch string(key) {
		case "name":
			d.Name, err = c.stringField("name")
		case "description":
			d.Description, err = c.stringField("description")
		case "namespace":
			d.Namespace, err = c.stringField("namespace")
		case "source":
			d.Source, err = c.stringField("source")
		case "readWrite":
			d.ReadWrite, err = c.stringField("readWrite")
		case "inputSchema":
			d.InputSchema, err = c.rawField()
		case "outputSchema":
			d.OutputSchema, err = c.rawField()
		case "annotations":
			d.Annotations, err = c.annotations()
		default:
			err = c.skip()
		}
		return err
	})
	if err != nil {
		return err
	}
	c.skipSpace()
	if c.pos < len(c.src) {
		return c.errorf("unexpected %s after the definition", c.describe())
	}
	return nil
}

// eachMember reads the object at c.pos (after optional whitespace), calling
// f for each member with c.pos at the member's value.
func (c *canonicalizer) eachMember(f func(key []byte) error) error {
	if err := c.expect('{', "an object"); err != nil {
		return err
	}
	if err := c.enter(); err != nil {
		return err
	}
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == '}' {
		c.pos++
		c.depth--
		return nil
	}
	var key []byte
	for {
		c.skipSpace()
		if c.pos >= len(c.src) || c.src[c.pos] != '"' {
			return c.errorf("want a string key, have %s", c.describe())
		}
		end, escaped, err := c.scanString()
		if err != nil {
			return err
		}
		key = c.src[c.pos+1 : end]
		if escaped {
			key = appendUnescaped(nil, key)
		}
		c.pos = end + 1
		if err := c.expect(':', "':'"); err != nil {
			return err
		}
		c.skipSpace()
		if err := f(key); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos < len(c.src) && c.src[c.pos] == ',' {
			c.pos++
			continue
		}
		if err := c.expect('}', "',' or '}'"); err != nil {
			return err
		}
		c.depth--
		return nil
	}
}

func (c *canonicalizer) stringField(field string) (string, error) {
	if c.pos >= len(c.src) || c.src[c.pos] != '"' {
		return "", fmt.Errorf("%s: want a string, have %s", field, c.describe())
	}
	end, escaped, err := c.scanString()
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	raw := c.src[c.pos+1 : end]
	c.pos = end + 1
	if escaped {
		c.str = appendUnescaped(c.str[:0], raw)
		return string(c.str), nil
	}
	return string(raw), nil
}

func (c *canonicalizer) rawField() (json.RawMessage, error) {
	start := c.pos
	if err := c.skip(); err != nil {
		return nil, err
	}
	return c.src[start:c.pos:c.pos], nil
}

// annotations reads the annotations member; null means none stated.
func (c *canonicalizer) annotations() (*Annotations, error) {
	if bytes.HasPrefix(c.src[c.pos:], []byte("null")) {
		c.pos += len("null")
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
			err = c.skip()
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
	rest := c.src[c.pos:]
	var b bool
	switch {
	case bytes.HasPrefix(rest, []byte("true")):
		c.pos += len("true")
		b = true
	case bytes.HasPrefix(rest, []byte("false")):
		c.pos += len("false")
	case bytes.HasPrefix(rest, []byte("null")):
		c.pos += len("null")
		return nil, nil
	default:
		return nil, fmt.Errorf("%s: want a boolean, have %s", field, c.describe())
	}
	return &b, nil
}
