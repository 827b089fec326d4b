package main

import (
	"path"
	"regexp"
	"strings"
)

// A verdict is what the tool does with one tag: rename it with prefix
// ("RB", "P2", "RD"), write replace instead, leave it (skip), or report
// it as unclassified (prefix and replace empty, skip false).
type verdict struct {
	prefix  string
	replace string // an override's whole replacement, e.g. "P2-D1/v0"
	skip    bool
	why     string
}

func (v verdict) classified() bool { return v.skip || v.prefix != "" || v.replace != "" }

// ambiguity names the families whose bare tags mean different things in
// RB and P2, or "" for a tag that names its document by itself.
func ambiguity(t tag) string {
	n := t.n()
	switch {
	case t.dots != "":
		return ""
	case t.family == "A" && n >= 1 && n <= 10 && !leadingZero(t.num):
		return "A"
	case t.family == "D" && n >= 1 && n <= 8:
		return "D"
	case t.family == "G" && n >= 1 && n <= 6:
		return "G"
	}
	return ""
}

// leadingZero reports a number written with a leading zero: D001 and C023
// (the conformance tool's checks), B042 (a review finding), or, in a Go
// name, A03 (RB A0.3 with its dot dropped).
func leadingZero(num string) bool { return len(num) > 1 && num[0] == '0' }

// unique is the document of a tag whose family and number say it alone:
// the verdict, and whether there was one.
func unique(t tag) (verdict, bool) {
	n := t.n()
	if leadingZero(t.num) {
		if t.ident && t.family == "A" && len(t.num) == 2 {
			return verdict{prefix: "RB", why: "RB A0.x in a Go name"}, true
		}
		return verdict{skip: true, why: "a number with a leading zero is a check id, not a tag"}, true
	}
	in := func(lo, hi int) bool { return n >= lo && n <= hi }
	switch f := t.family; {
	case f == "R4" || f == "V2.1":
		return verdict{prefix: "P2", why: "P2 numbered rule"}, true
	case f == "ST" && in(1, 21), f == "S" && in(1, 47):
		return verdict{prefix: "P2", why: "P2 " + f + " family"}, true
	case f == "D" && in(9, 11):
		return verdict{prefix: "P2", why: "P2 §10 decision"}, true
	case f == "D" && in(12, 14):
		return verdict{prefix: "RD", why: "relayd's own decision"}, true
	case f == "A" && (t.dots != "" || n == 0 || in(11, 17)):
		return verdict{prefix: "RB", why: "RB §A section or item"}, true
	case f == "D" && t.dots != "", f == "G" && t.dots != "":
		return verdict{}, false
	case f == "B" && in(0, 19), f == "C" && in(1, 3), f == "E" && in(1, 6), f == "F" && in(1, 110), f == "G" && in(7, 26):
		return verdict{prefix: "RB", why: "RB " + f + " family"}, true
	case ambiguity(t) != "":
		return verdict{}, false
	}
	return verdict{skip: true, why: "out of every family's range"}, true
}

// marked matches a tag that already names its document.
var marked = regexp.MustCompile(`(?:^|[^A-Za-z0-9_])(RB|P2)[-_](ST|[A-GS])`)

// documentNames are the file names that, written on a line, say which
// document its tags come from.
var documentNames = map[string]string{"relay-behaviour": "RB", "protocol-2": "P2"}

// neighbours is the one document the line's other tags name, or "".
// Only tags that say their document by themselves count, and of RB's
// only its structural sections: A, B, C, E and F beside an A tag, A, B
// and F beside a D tag (the glossary's rule: D1–D8 beside A, B or F tags
// are RB's). RB's G surprises are cited in every context, so they say
// nothing; a G tag itself is decided by its file alone.
func neighbours(line string, tags []tag, self tag) string {
	amb := ambiguity(self)
	if amb == "G" {
		return ""
	}
	rbFamilies := map[string]string{"A": "ABCEF", "D": "ABF"}[amb]
	seen := map[string]bool{}
	note := func(doc, family string) {
		if doc == "P2" || doc == "RB" && strings.Contains(rbFamilies, family) {
			seen[doc] = true
		}
	}
	for _, m := range marked.FindAllStringSubmatch(line, -1) {
		note(m[1], m[2])
	}
	for word, doc := range documentNames {
		if strings.Contains(line, word) {
			seen[doc] = true
		}
	}
	for _, o := range tags {
		if v, ok := unique(o); ok && o.start != self.start && !v.skip {
			note(v.prefix, o.family)
		}
	}
	if len(seen) != 1 {
		return ""
	}
	if seen["RB"] {
		return "RB"
	}
	return "P2"
}

// classify decides one tag of a line of file.
func (r *rules) classify(file, line string, tags []tag, t tag) verdict {
	if v, ok := r.lineOverride(file, line, t); ok {
		return v
	}
	if v, ok := r.fileSkip(file, t); ok {
		return v
	}
	if v, ok := unique(t); ok {
		return v
	}
	if p := neighbours(line, tags, t); p != "" {
		return verdict{prefix: p, why: "beside " + p + " tags on the line"}
	}
	if v, ok := r.fileDefault(file, t); ok {
		return v // a default with no prefix reports the tag
	}
	return verdict{why: "ambiguous " + ambiguity(t) + " tag with no rule for " + file}
}

// match reports whether file matches a rule's pattern: a path.Match
// glob, a directory prefix ending in "/", or "*" for every file.
func match(pattern, file string) bool {
	if pattern == "*" {
		return true
	}
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(file, pattern)
	}
	ok, _ := path.Match(pattern, file)
	return ok
}
