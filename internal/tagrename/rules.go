package main

import "strings"

// A lineRule decides the tags named tag (all tags when empty) on the
// lines of file (a glob, or a directory ending in "/") that contain
// contains. It is keyed by the line's text, not its number, so it still
// finds its line after other edits move it.
type lineRule struct {
	file, contains, tag string
	cell                bool // only the tag that is the row's first cell, "| D1 |"
	verdict
}

// A fileRule gives the tags of one ambiguous family ("A" for A1–A10, "D"
// for D1–D8, "G" for G1–G6), or with skip any tag of family, in the
// files matching file their document.
type fileRule struct {
	file, family string
	verdict
}

// rules are the tables the tool decides by.
type rules struct {
	lines    []lineRule
	defaults []fileRule
	skips    []fileRule
	literals []literalRule
}

// A literalRule replaces the text old with new in file: the README's
// row labels that are not tags ("E", "§7").
type literalRule struct {
	file, old, new string
}

// excluded are the files the tool never edits: the glossary explains the
// old names, and the tool's own tables and tests spell them.
func excluded(file string) bool {
	return file == "docs/glossary.md" || strings.HasPrefix(file, "internal/tagrename/")
}

func (r *rules) lineOverride(file, line string, t tag) (verdict, bool) {
	for _, l := range r.lines {
		if l.cell && !(strings.HasPrefix(line, "| "+t.text+" |") && t.start == 2) {
			continue
		}
		if match(l.file, file) && strings.Contains(line, l.contains) && (l.tag == "" || l.tag == t.text) {
			return l.verdict, true
		}
	}
	return verdict{}, false
}

func (r *rules) fileSkip(file string, t tag) (verdict, bool) {
	for _, s := range r.skips {
		if match(s.file, file) && s.family == t.family {
			return s.verdict, true
		}
	}
	return verdict{}, false
}

func (r *rules) fileDefault(file string, t tag) (verdict, bool) {
	for _, d := range r.defaults {
		if match(d.file, file) && d.family == ambiguity(t) {
			return d.verdict, true
		}
	}
	return verdict{}, false
}

func rb(why string) verdict { return verdict{prefix: "RB", why: why} }
func p2(why string) verdict { return verdict{prefix: "P2", why: why} }

// defaultRules are the tables of docs/glossary.md as data. The first
// rule that matches decides; a file default is reached only when the
// tag's family, its number and the line's other tags leave it open.
func defaultRules() *rules {
	return &rules{
		skips: []fileRule{
			{"projection/*_test.go", "S", verdict{skip: true, why: "S1 is a site id in the projection tests"}},
		},
		defaults: fileDefaults(),
		lines:    lineOverrides(),
		literals: readmeLabels(),
	}
}

// fileDefaults decide the ambiguous families by file, as the glossary's
// table does. D1–D8 are P2's §10 decisions unless RB's A, B or F tags
// sit beside them (the line's neighbours decide that first). G1–G6 are
// RB's surprises, but P2's store guarantees in claim2.go, and left to a
// line rule anywhere else in store/. A1–A10 are RB's §A sections in
// protocol "0" code and P2's ambiguities in the dual-protocol code; a
// file in neither list is reported. A verdict with no prefix reports.
func fileDefaults() []fileRule {
	rbA := rb("RB §A section in protocol \"0\" code")
	p2A := p2("P2 §2.4.6 ambiguity in dual-protocol code")
	out := []fileRule{
		{"store/storetest/claim2.go", "G", p2("P2 §6.3 store guarantee")},
		{"store/", "G", verdict{why: "G1–G6 in store code may be RB's surprises or P2's store guarantees: add a line rule"}},
		{"*", "G", rb("RB §G surprise")},
		{"*", "D", p2("P2 §10 decision")},
	}
	for _, f := range []string{"plane/codec0/", "plane/plane.go",
		"plane/refusals_test.go", "plane/schema_test.go", "plane/routing_test.go", "plane/debug_test.go",
		"plane/site_plane_auth_test.go", "plane/freezegate_test.go", "protocol/decode.go"} {
		out = append(out, fileRule{f, "A", rbA})
	}
	for _, f := range []string{"README.md", "docs/", "interop/", "plane/v2_*", "plane/codec/", "plane/codec2/",
		"plane/classify.go", "plane/classify_internal_test.go", "plane/harness_test.go",
		"plane/adversarial_test.go", "plane/differences_test.go", "protocol/proto2/", "store/", "internal/",
		"projection/"} {
		out = append(out, fileRule{f, "A", p2A})
	}
	return out
}

// lineOverrides decide the tags that their file's default would get
// wrong: a P2 ambiguity cited in protocol "0" code, and the README's row
// labels that exist once per protocol, which say which protocol's row
// they are.
func lineOverrides() []lineRule {
	label := func(contains, tag, replace string) lineRule {
		return lineRule{file: "README.md", contains: contains, tag: tag, cell: true,
			verdict: verdict{replace: replace, why: "README row label, one per protocol"}}
	}
	return []lineRule{
		{file: "plane/codec0/daemon.go", contains: `as protocol "2" refuses it (spec A7)`, tag: "A7",
			verdict: p2("P2 A7: a revoked device is refused under \"0\" too")},
		label("| D1 | `WireError.retryAfter`", "D1", "P2-D1/v0"),
		label("| D11 | a payload is accepted for whichever device", "D11", "P2-D11/v0"),
		label("| D1 | a pairing start refused at capacity", "D1", "P2-D1/v2"),
		label("| D11 | as under `\"0\"`", "D11", "P2-D11/v2"),
	}
}

// readmeLabels are the README row labels that are not tags at all, and
// the places that cite them.
func readmeLabels() []literalRule {
	return []literalRule{
		{"README.md", "| E | the debug page", "| RB-E | the debug page"},
		{"README.md", "| §7 | a site's `succeeds` chain", "| P2-S22 | a site's `succeeds` chain"},
		{"docs/operations.md", "(difference E in the README)", "(difference RB-E in the README)"},
		{"README.md", ", E, §7) hold for", ", RB-E, P2-S22) hold for"},
		{"plane/v2_refusals_test.go", "(difference E)", "(difference RB-E)"},
	}
}
