package main

import "strings"

// A change is one tag renamed, or, in unclassified, one left alone.
type change struct {
	line     int
	old, new string
	why      string
	text     string // the line, for an unclassified tag
}

// A result is one file renamed.
type result struct {
	text         string
	changes      []change
	unclassified []change
	skipped      []change // tag-like words that are not tags
}

// renameFile renames the tags of every line of one file.
func (r *rules) renameFile(file, src string) result {
	lines := strings.SplitAfter(src, "\n")
	var res result
	var b strings.Builder
	for i, line := range lines {
		line, lit := r.replaceLiterals(file, line)
		nl, found := r.renameLine(file, line)
		found.changes = append(lit, found.changes...)
		res.changes = append(res.changes, numbered(found.changes, i+1)...)
		res.unclassified = append(res.unclassified, numbered(found.unclassified, i+1)...)
		res.skipped = append(res.skipped, numbered(found.skipped, i+1)...)
		b.WriteString(nl)
	}
	res.text = b.String()
	return res
}

// numbered sets the line number of changes.
func numbered(changes []change, line int) []change {
	for i := range changes {
		changes[i].line = line
	}
	return changes
}

// renameLine renames the tags of one line. The result's text is unset.
func (r *rules) renameLine(file, line string) (string, result) {
	tags := scanLine(line)
	var found result
	var b strings.Builder
	at := 0
	for _, t := range tags {
		v := r.classify(file, line, tags, t)
		if !v.classified() {
			found.unclassified = append(found.unclassified, change{old: t.text, why: v.why, text: line})
			continue
		}
		if v.skip {
			found.skipped = append(found.skipped, change{old: t.text, why: v.why})
			continue
		}
		start, rep := t.start, replacement(t, v)
		if t.rangeEnd && !t.ident {
			start, rep = t.start-1, "–"+rep
		}
		b.WriteString(line[at:start])
		b.WriteString(rep)
		at = t.end
		found.changes = append(found.changes, change{old: line[start:t.end], new: rep, why: v.why})
	}
	b.WriteString(line[at:])
	return b.String(), found
}

// replacement is what a tag becomes: P2-D1 in prose, TestP2_D1 and
// P2_D11 in names (a Go name holds no '-').
func replacement(t tag, v verdict) string {
	if v.replace != "" {
		return v.replace
	}
	if t.ident {
		return t.identHead + v.prefix + "_" + t.text
	}
	return v.prefix + "-" + t.text
}

// replaceLiterals applies the literal rules of file to one line.
func (r *rules) replaceLiterals(file, line string) (string, []change) {
	var ch []change
	for _, l := range r.literals {
		if l.file == file && strings.Contains(line, l.old) {
			line = strings.ReplaceAll(line, l.old, l.new)
			ch = append(ch, change{old: l.old, new: l.new, why: "literal rule"})
		}
	}
	return line, ch
}
