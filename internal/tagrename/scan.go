package main

import (
	"regexp"
	"strconv"
	"strings"
)

// A tag is one spec tag found in a line of text: a family letter (or ST),
// its number, and the dotted items after it (".3" in A0.3).
type tag struct {
	start, end int    // byte offsets of the whole match in the line
	family     string // "A" … "G", "S", "ST", "R4", "V2.1"
	num        string // the number as written ("0" in A0.3, "03" in TestA03_)
	dots       string // ".3" in A0.3, "" for a bare tag
	ident      bool   // in a Go name or a store-contract case name
	identHead  string // "Test" in TestD1_, "" in "D11_…"
	rangeEnd   bool   // the second tag of "D1-D11", after an ASCII hyphen
	text       string // the tag as written, without identHead
}

// n is the tag's number, or -1 for R4 and V2.1 rules.
func (t tag) n() int {
	if t.num == "" {
		return -1
	}
	v, err := strconv.Atoi(t.num)
	if err != nil {
		return -1
	}
	return v
}

var (
	// textTag matches a tag in prose. R4.x.y and V2.1.x are P2's numbered
	// rules; a bare R or V followed by a number is not a tag here.
	textTag = regexp.MustCompile(`(?:R4((?:\.[0-9]+)+)|V2\.1((?:\.[0-9]+)*)|(ST|[A-GS])([0-9]+)((?:\.[0-9]+)*))`)
	// identTag matches a tag opening a Go name (TestD1_…, TestA03A04_…)
	// or a store-contract case name ("D11_…"): the tag and an underscore.
	identTag = regexp.MustCompile(`(Test|Benchmark|Fuzz|Example)?(ST|[A-GS])([0-9]+)((?:[A-G][0-9]+)*)_`)
)

// wordByte reports whether b can be part of a word around a tag.
func wordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// scanLine returns the tags in one line, in order, without overlaps.
func scanLine(line string) []tag {
	var out []tag
	taken := make([]bool, len(line)+1)
	for _, m := range identTag.FindAllStringSubmatchIndex(line, -1) {
		if m[0] > 0 && wordByte(line[m[0]-1]) {
			continue
		}
		head := ""
		if m[2] >= 0 {
			head = line[m[2]:m[3]]
		}
		t := tag{start: m[0], end: m[1] - 1, family: line[m[4]:m[5]], num: line[m[6]:m[7]],
			ident: true, identHead: head}
		t.text = line[m[4]:t.end]
		out = append(out, t)
		for i := t.start; i < t.end; i++ {
			taken[i] = true
		}
	}
	for _, m := range textTag.FindAllStringSubmatchIndex(line, -1) {
		if taken[m[0]] || !freeStanding(line, m[0], m[1]) {
			continue
		}
		out = append(out, textTagAt(line, m))
	}
	sortTags(out)
	return out
}

// freeStanding reports whether line[start:end] is a word of its own: not
// inside X25519 or U+E000, not already prefixed (RB-A9, G-R16), not a
// version (v0.1.1) or a larger word.
func freeStanding(line string, start, end int) bool {
	if start > 0 {
		p := line[start-1]
		if wordByte(p) || p == '+' || p == '.' || p == '%' {
			return false
		}
		if p == '-' && !rangeHyphen(line, start) {
			return false
		}
	}
	if end < len(line) && (wordByte(line[end]) || line[end] == '-' && end+1 < len(line) && wordByte(line[end+1]) && !startsTag(line[end+1:])) {
		return false
	}
	return true
}

// startsTag reports whether s opens with a tag (for "D1-D11").
func startsTag(s string) bool {
	loc := textTag.FindStringIndex(s)
	return loc != nil && loc[0] == 0
}

// rangeHyphen reports whether the hyphen before line[start] joins two
// tags of one range, "D1-D11", rather than a prefix, "RB-D1" or "G-R16".
func rangeHyphen(line string, start int) bool {
	before := line[:start-1]
	i := len(before)
	for i > 0 && (wordByte(before[i-1]) || before[i-1] == '.') {
		i--
	}
	word := before[i:]
	if i > 0 && (before[i-1] == '-' || wordByte(before[i-1])) {
		return false
	}
	loc := textTag.FindStringIndex(word)
	return loc != nil && loc[0] == 0 && loc[1] == len(word)
}

// textTagAt builds the tag of one textTag match.
func textTagAt(line string, m []int) tag {
	t := tag{start: m[0], end: m[1], text: line[m[0]:m[1]]}
	switch {
	case m[2] >= 0:
		t.family, t.dots = "R4", line[m[2]:m[3]]
	case strings.HasPrefix(t.text, "V2.1"):
		t.family, t.dots = "V2.1", line[m[0]+4:m[1]]
	default:
		t.family, t.num, t.dots = line[m[6]:m[7]], line[m[8]:m[9]], line[m[10]:m[11]]
	}
	t.rangeEnd = m[0] > 0 && line[m[0]-1] == '-'
	return t
}

// sortTags orders tags by position (insertion sort: a line holds few).
func sortTags(ts []tag) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].start < ts[j-1].start; j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}
