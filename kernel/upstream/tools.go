package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/nearest"
	"github.com/sharedos/sharedos-mcp/policy"
)

// SourcePrefix begins the source of every brokered tool's definition:
// "upstream:<name>". The kernel sets it, not the upstream, so no upstream
// can pass its tools off as the kernel's own.
const SourcePrefix = "upstream:"

// MaxToolsPerUpstream is the most tools one upstream may offer; more are
// left out, and reported.
const MaxToolsPerUpstream = hashing.MaxTools

// Tool is a brokered tool as a snapshot publishes it: the upstream's
// definition under the published name, and how calls to it are
// authorized.
type Tool struct {
	Name         string // published: "<upstream>.<upstream's tool name>"
	Upstream     string
	UpstreamTool string // the name the upstream knows it by
	Description  string
	InputSchema  json.RawMessage // a JSON object
	OutputSchema json.RawMessage // nil when the upstream states none
	// Annotations are the upstream's behavioural hints, nil when it states
	// none. They are published and trusted for nothing.
	Annotations *hashing.Annotations
	Action      string          // the grant action a call needs
	Resource    policy.Template // the resource a call acts on, in the upstream's namespace
	// Arguments says what the input schema holds for each placeholder of
	// Resource, in its order.
	Arguments []Argument
	Hash      string // SHA-256 of the definition, as pinned
	// host resolves the resource's path placeholders on this host, for an
	// upstream configured with host_paths; nil otherwise. hostDir is the
	// directory a relative path is taken from there.
	host    policy.HostPath
	hostDir string
}

// ClassifiedBy reports whether spec, an upstream's [[upstream]] as it is
// configured now, authorizes calls of t as they were authorized when t's
// snapshot was taken: the same action on the same resource template and,
// when the template has a {name:path}, its paths resolved on this host
// from the same directory, or not at all. A config reload that changes
// any of these reclassifies the tool, and a call made with t must then
// not be decided on what t says.
func (t *Tool) ClassifiedBy(spec *Spec) bool {
	ts, ok := spec.Tool(t.UpstreamTool)
	if !ok || spec.Name != t.Upstream || ts.Action != t.Action || ts.Resource.String() != t.Resource.String() {
		return false
	}
	if spec.HostPaths == (t.host != nil) && (!spec.HostPaths || spec.Dir == t.hostDir) {
		return true
	}
	// Paths are resolved otherwise now, which only a {name:path} reads.
	return !slices.ContainsFunc(t.Resource.Placeholders(), func(p policy.Placeholder) bool { return p.Kind == policy.KindPath })
}

// ReadWrite is the definition's readWrite: "read" for the actions that
// only observe (read, list, search), "write" for write and call. It is
// derived from the configured action, never from the upstream's hints.
func (t *Tool) ReadWrite() string {
	switch t.Action {
	case policy.ActionRead, policy.ActionList, policy.ActionSearch:
		return "read"
	}
	return "write"
}

// Definition is the kernel-side definition to put in a turn's catalogue.
func (t *Tool) Definition() hashing.Definition {
	return hashing.Definition{
		Name: t.Name, Description: t.Description, Namespace: t.Upstream, Source: SourcePrefix + t.Upstream,
		ReadWrite: t.ReadWrite(), InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations,
	}
}

// ErrInvalidArguments is what Resolve fails with when the arguments
// cannot be forwarded: not a JSON object, a member name that repeats or
// folds onto another, or an argument that cannot name its resource
// segment (wrapping a *policy.ArgumentError).
var ErrInvalidArguments = errors.New("invalid arguments")

// Why a tool is not published.
const (
	// ReasonInvalidName: "<upstream>.<tool>" is not 1-128 of [A-Za-z0-9_.-].
	// The name is never rewritten: a rewritten name could collide.
	ReasonInvalidName = "invalid_name"
	// ReasonNotOffered: a [[upstream.tool]] names a tool the upstream does
	// not offer.
	ReasonNotOffered = "not_offered"
	// ReasonBadPlaceholder: the resource names an argument the input
	// schema does not declare as a string or an integer.
	ReasonBadPlaceholder = "bad_placeholder"
	// ReasonBadResource: the tool's name cannot be its default resource's
	// one segment ("." or ".."); configure a resource for it.
	ReasonBadResource = "bad_resource"
	// ReasonInvalidDefinition: the definition cannot be published (an
	// empty or overlong description, a schema that is not an object, …).
	ReasonInvalidDefinition = "invalid_definition"
	// ReasonQuarantined: the definition differs from its pin; Changed says
	// in which fields. An approval pins the new one.
	ReasonQuarantined = "quarantined"
	// ReasonNotPinned: the definition could not be pinned (the pins file
	// could not be written); the kernel log says why.
	ReasonNotPinned = "not_pinned"
	// ReasonUnrecorded: the definition was approved, but the approval is
	// not in the audit log yet (RecordApproval failed); it is published
	// once it is.
	ReasonUnrecorded = "approval_unrecorded"
	// ReasonTooMany: the upstream offers more than MaxToolsPerUpstream
	// tools; the rest are left out.
	ReasonTooMany = "too_many_tools"
)

// Withheld is a tool an upstream offers, or the config names, that a
// snapshot does not publish, and why.
type Withheld struct {
	Upstream string
	Tool     string // the upstream's name for it
	Name     string // the name it would be published under
	Reason   string // one of the Reason constants
	Detail   string // for people: what is wrong and what to do
	Changed  []string
	Hash     string // SHA-256 of the definition offered now, when there is one
	Pinned   string // SHA-256 of the pinned one, for ReasonQuarantined
}

// definitionFields are the fields of an upstream's tool definition that
// are pinned, in the order a change is reported.
var definitionFields = []string{"name", "description", "inputSchema", "outputSchema", "annotations"}

// definition is an upstream's tool definition as pinned.
type definition struct {
	name      string
	canonical []byte // canonical JSON (docs/catalog-hash.md) of definitionFields
	sha       string
}

func newDefinition(t *mcp.Tool) (*definition, error) {
	obj := map[string]any{"name": t.Name, "description": t.Description, "inputSchema": t.InputSchema}
	if t.OutputSchema != nil {
		obj["outputSchema"] = t.OutputSchema
	}
	if a := t.Annotations; a != nil {
		obj["annotations"] = annotationsObject(a)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode definition: %w", err)
	}
	canon, err := hashing.CanonicalJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("canonical definition: %w", err)
	}
	sum := sha256.Sum256(canon)
	return &definition{name: t.Name, canonical: canon, sha: hex.EncodeToString(sum[:])}, nil
}

// annotationsObject is the annotations as the client read them, written
// out here rather than by the SDK's encoder, so that a pin does not
// change when the SDK changes how it encodes them. (The client reads
// readOnlyHint and idempotentHint as booleans: absent and false are one.)
func annotationsObject(a *mcp.ToolAnnotations) map[string]any {
	obj := map[string]any{"readOnlyHint": a.ReadOnlyHint, "idempotentHint": a.IdempotentHint}
	if a.DestructiveHint != nil {
		obj["destructiveHint"] = *a.DestructiveHint
	}
	if a.OpenWorldHint != nil {
		obj["openWorldHint"] = *a.OpenWorldHint
	}
	if a.Title != "" {
		obj["title"] = a.Title
	}
	return obj
}

// listed is one tool of an upstream's listing, judged on everything but
// its pin, which can change without the listing changing.
type listed struct {
	def      *definition // nil when the definition could not be read
	tool     *Tool       // the candidate for publishing; nil when withheld
	withheld *Withheld
}

// judge turns an upstream's listing into candidates and withheld tools.
// Every configured tool the listing lacks is withheld as not offered.
func judge(spec *Spec, tools []*mcp.Tool) []listed {
	out := make([]listed, 0, len(tools))
	offered := map[string]int{}
	for _, mt := range tools {
		offered[mt.Name]++
	}
	for i, mt := range tools {
		name := spec.Name + "." + mt.Name
		switch {
		case i >= MaxToolsPerUpstream:
			out = append(out, listed{withheld: &Withheld{Upstream: spec.Name, Tool: mt.Name, Name: name, Reason: ReasonTooMany,
				Detail: fmt.Sprintf("the upstream offers %d tools or more; only the first %d are considered", len(tools), MaxToolsPerUpstream)}})
		case offered[mt.Name] > 1:
			// Which of the two a call would reach is the upstream's secret.
			out = append(out, listed{withheld: &Withheld{Upstream: spec.Name, Tool: mt.Name, Name: name, Reason: ReasonInvalidDefinition,
				Detail: fmt.Sprintf("the upstream lists %d tools named %q", offered[mt.Name], mt.Name)}})
		default:
			out = append(out, judgeOne(spec, mt, name))
		}
	}
	for _, n := range sortedKeys(spec.Tools) {
		if offered[n] == 0 {
			detail := fmt.Sprintf("a [[upstream.tool]] names %q, which the upstream does not offer", n)
			if s := nearest.Find(n, nearest.Names(slices.Sorted(maps.Keys(offered))...)); s != "" {
				detail += fmt.Sprintf("; did you mean %q?", s)
			}
			out = append(out, listed{withheld: &Withheld{Upstream: spec.Name, Tool: n, Name: spec.Name + "." + n, Reason: ReasonNotOffered, Detail: detail}})
		}
	}
	return out
}

func judgeOne(spec *Spec, mt *mcp.Tool, name string) listed {
	l := listed{withheld: &Withheld{Upstream: spec.Name, Tool: mt.Name, Name: name}}
	withhold := func(reason, format string, args ...any) listed {
		l.withheld.Reason, l.withheld.Detail = reason, fmt.Sprintf(format, args...)
		return l
	}
	def, err := newDefinition(mt)
	if err != nil {
		return withhold(ReasonInvalidDefinition, "%v", err)
	}
	l.def, l.withheld.Hash = def, def.sha
	if !hashing.ValidToolName(name) {
		return withhold(ReasonInvalidName, "%s is not 1-128 of [A-Za-z0-9_.-]; it is left out, not renamed", strconv.Quote(shorten(name, 160)))
	}
	ts, ok := spec.Tool(mt.Name)
	if !ok {
		return withhold(ReasonBadResource, "the name %q cannot be a resource segment; configure a resource for it", mt.Name)
	}
	in, err := json.Marshal(mt.InputSchema)
	if err != nil {
		return withhold(ReasonInvalidDefinition, "inputSchema: %v", err)
	}
	if msg := checkPlaceholders(ts.Resource, in); msg != "" {
		return withhold(ReasonBadPlaceholder, "resource %s: %s", ts.Resource, msg)
	}
	t := &Tool{
		Name: name, Upstream: spec.Name, UpstreamTool: mt.Name, Description: mt.Description, InputSchema: in,
		Action: ts.Action, Resource: ts.Resource, Arguments: placeholderArguments(ts.Resource, in), Hash: def.sha,
	}
	if spec.HostPaths {
		t.host, t.hostDir = hostPath(spec.Dir), spec.Dir
	}
	if mt.OutputSchema != nil {
		if t.OutputSchema, err = json.Marshal(mt.OutputSchema); err != nil {
			return withhold(ReasonInvalidDefinition, "outputSchema: %v", err)
		}
	}
	if a := mt.Annotations; a != nil {
		ro, idem := a.ReadOnlyHint, a.IdempotentHint
		t.Annotations = &hashing.Annotations{ReadOnly: &ro, Idempotent: &idem}
		if a.DestructiveHint != nil {
			d := *a.DestructiveHint
			t.Annotations.Destructive = &d
		}
	}
	if _, err := hashing.Project([]hashing.Definition{t.Definition()}); err != nil {
		return withhold(ReasonInvalidDefinition, "%v", err)
	}
	return listed{def: def, tool: t}
}

// checkPlaceholders says what is wrong with a template's placeholders for
// a tool whose input schema is schema: each must be a property declared
// with type "string" or "integer", a path or URL placeholder's with type
// "string". "" when nothing is.
func checkPlaceholders(r policy.Template, schema json.RawMessage) string {
	placeholders := r.Placeholders()
	if len(placeholders) == 0 {
		return ""
	}
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return "the input schema is not an object with properties"
	}
	for _, ph := range placeholders {
		shown := ph.Name
		want := []string{"string", "integer"}
		if ph.Kind != policy.KindSegment {
			shown += ":" + string(ph.Kind)
			want = want[:1]
		}
		p, ok := s.Properties[ph.Name]
		if !ok {
			return fmt.Sprintf("placeholder {%s} names no argument of the tool's input schema", shown)
		}
		if typ, _ := p.Type.(string); !slices.Contains(want, typ) {
			return fmt.Sprintf("placeholder {%s}: the argument's type is %v, want %s", shown, describeType(p.Type), quotedOr(want))
		}
	}
	return ""
}

// quotedOr is a list of words for a message: "a" or "b".
func quotedOr(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = strconv.Quote(w)
	}
	return strings.Join(q, " or ")
}

func describeType(t any) string {
	if t == nil {
		return "not stated"
	}
	b, _ := json.Marshal(t)
	return string(b)
}

// shorten cuts s to at most n bytes, at a UTF-8 boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && i < len(s) && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}
