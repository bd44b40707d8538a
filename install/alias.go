package install

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Aliases are how each harness shows a tool to its model: Claude Code
// turns files.read into mcp__sharedos__files_read. They are presentation
// only. The harness calls the server with the tool's real name, and no
// authorization decision ever looks at an alias.
//
// The rules, and where they come from:
//
//   - claude-code: "mcp__" + server + "__" + tool, every character outside
//     [A-Za-z0-9_-] replaced by "_" (observed against Claude Code 2.1.197,
//     docs/harness-driving.md). Claude Code does not shorten names; one
//     over 64 characters is flagged TooLong, since the model API refuses
//     it.
//   - codex: the same form and character rule; a name over 64 characters
//     keeps its first 24 and appends the 40 hex digits of the SHA-1 of the
//     unsanitized name (openai/codex codex-rs/core/src/
//     mcp_connection_manager.rs, qualify_tools). Newer Codex sends the
//     tools grouped as namespace "mcp__sharedos" + function "files_read";
//     the flat name is what its allow-lists and logs use.
//   - gemini: "mcp_" + server + "_" + tool, every UTF-16 unit outside
//     [A-Za-z0-9_.:-] replaced by "_", and a name over 63 characters cut
//     to its first 30 and last 30 around "..." (google-gemini/gemini-cli
//     packages/core/src/tools/mcp-tool.ts, generateValidName, 2026-08).
//     Gemini CLI releases before the mcp_ prefix used the bare tool name,
//     [A-Za-z0-9_.-], and a 28 + "___" + 32 cut.
//   - pi: the pi-mcp-adapter proxy tool's name for it, server + "_" + tool
//     with "." replaced by "_" (nicobailon/pi-mcp-adapter types.ts,
//     formatToolName, default toolPrefix "server"). The model passes it as
//     an argument to the one `mcp` tool, so there is no length limit.
//   - deepseek: "mcp__" + server + "__" + tool with [A-Za-z0-9_-] kept and
//     every other UTF-16 unit "_"; when that changed the name or it is
//     over 64 characters, the first 51 characters (at most) + "_" + the
//     first 12 hex digits of the SHA-256 of server, a NUL byte and the
//     tool's real name, so two tools that sanitize alike still get apart
//     (@deepseek-ai/dsh-mcp-client 0.1.0-rc.8, publicToolName; the
//     conformance column saw these names).

// AliasRow is one tool's alias for one harness.
type AliasRow struct {
	Tool      string   // the tool's real name
	Alias     string   // what the harness shows the model
	Rewritten bool     // characters were replaced
	Truncated bool     // the harness shortened the name
	Hashed    bool     // the alias carries a hash of the real name
	TooLong   bool     // the alias is over the harness's limit as it stands
	Collides  bool     // another tool in the list has the same alias
	Notes     []string // why the flags are set, for people
}

// aliasLimit is the longest tool name the model APIs behind Claude Code,
// Codex and DeepSeek accept.
const aliasLimit = 64

// Alias returns the name harness shows for server's tool, and notes on
// anything the harness changed. An unknown harness gets the tool's own
// name and a note saying so.
func Alias(harness, server, tool string) (alias string, notes []string) {
	r := aliasRow(harness, server, tool)
	return r.Alias, r.Notes
}

// Aliases returns the sharedos alias of every tool for harness, flagging
// the ones that share an alias.
func Aliases(harness string, tools []string) []AliasRow {
	rows := make([]AliasRow, len(tools))
	byAlias := map[string][]int{}
	for i, t := range tools {
		rows[i] = aliasRow(harness, ServerName, t)
		byAlias[rows[i].Alias] = append(byAlias[rows[i].Alias], i)
	}
	for _, idx := range byAlias {
		if len(idx) < 2 {
			continue
		}
		for _, i := range idx {
			rows[i].Collides = true
			var others []string
			for _, j := range idx {
				if j != i && rows[j].Tool != rows[i].Tool {
					others = append(others, rows[j].Tool)
				}
			}
			if len(others) == 0 {
				rows[i].Notes = append(rows[i].Notes, "listed more than once")
			} else {
				rows[i].Notes = append(rows[i].Notes, "same alias as "+strings.Join(others, ", "))
			}
		}
	}
	return rows
}

// replaceOutside replaces every character not in keep with "_". A
// character outside the Basic Multilingual Plane counts twice when
// utf16 is set, as JavaScript's String.replace sees two code units.
func replaceOutside(s, keep string, utf16 bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf && (isAlnum(byte(r)) || strings.ContainsRune(keep, r)):
			b.WriteRune(r)
		case utf16 && r > 0xFFFF:
			b.WriteString("__")
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func aliasRow(harness, server, tool string) AliasRow {
	r := AliasRow{Tool: tool}
	switch harness {
	case "claude-code":
		r.Alias = "mcp__" + replaceOutside(server, "_-", false) + "__" + replaceOutside(tool, "_-", false)
		r.Rewritten = r.Alias != "mcp__"+server+"__"+tool
		if len(r.Alias) > aliasLimit {
			r.TooLong = true
			r.Notes = append(r.Notes, fmt.Sprintf("%d characters: over the %d the model API accepts", len(r.Alias), aliasLimit))
		}
	case "codex":
		raw := "mcp__" + server + "__" + tool
		r.Alias = replaceOutside(raw, "_-", false)
		r.Rewritten = r.Alias != raw
		if len(r.Alias) > aliasLimit {
			sum := sha1.Sum([]byte(raw))
			h := hex.EncodeToString(sum[:])
			r.Alias = r.Alias[:aliasLimit-len(h)] + h
			r.Truncated, r.Hashed = true, true
			r.Notes = append(r.Notes, fmt.Sprintf("over %d characters: cut and suffixed with the SHA-1 of the full name", aliasLimit))
		}
	case "gemini":
		raw := "mcp_" + server + "_" + tool
		r.Alias = replaceOutside(raw, "_-.:", true)
		r.Rewritten = r.Alias != raw
		if n := len(r.Alias); n > 63 {
			r.Alias = r.Alias[:30] + "..." + r.Alias[n-30:]
			r.Truncated = true
			r.Notes = append(r.Notes, fmt.Sprintf("%d characters: Gemini CLI keeps the first and last 30 around \"...\"", n))
		}
	case "pi":
		prefix := piPrefix(server)
		r.Alias = prefix + "_" + strings.ReplaceAll(tool, ".", "_")
		r.Rewritten = r.Alias != server+"_"+tool
		r.Notes = append(r.Notes, "called through pi-mcp-adapter's mcp tool: mcp({tool: \""+r.Alias+"\"})")
	case "deepseek":
		raw := "mcp__" + server + "__" + tool
		r.Alias = replaceOutside(raw, "_-", true)
		r.Rewritten = r.Alias != raw
		if r.Rewritten || len(r.Alias) > aliasLimit {
			sum := sha256.Sum256([]byte(server + "\x00" + tool))
			suffix := "_" + hex.EncodeToString(sum[:6])
			if keep := aliasLimit - len(suffix); len(r.Alias) > keep {
				r.Alias = r.Alias[:keep]
				r.Truncated = true
			}
			r.Alias += suffix
			r.Hashed = true
			r.Notes = append(r.Notes, "sanitized or long: suffixed with a hash of the real name")
		}
	default:
		r.Alias = tool
		r.Notes = append(r.Notes, fmt.Sprintf("unknown harness %q: no alias rule", harness))
	}
	if r.Rewritten {
		r.Notes = append(r.Notes, "characters replaced by \"_\"")
	}
	return r
}

// piPrefix is pi-mcp-adapter's server prefix: characters outside
// [A-Za-z0-9_-] become "_<hex code point>_".
func piPrefix(server string) string {
	var b strings.Builder
	for _, r := range server {
		if r < utf8.RuneSelf && (isAlnum(byte(r)) || r == '_' || r == '-') {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "_%x_", r)
		}
	}
	return b.String()
}
