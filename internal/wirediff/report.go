package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
)

// report compares the two sides' exchanges one by one, prints every
// difference and returns how many there are.
func report(out io.Writer, store, commit string, old, new side, list bool) int {
	om, nm := newMasker(), newMasker()
	diffs := 0
	n := max(len(old.exchanges), len(new.exchanges))
	for i := range n {
		if i >= len(old.exchanges) || i >= len(new.exchanges) {
			diffs++
			fmt.Fprintf(out, "[%s] exchange %d: only one side made it (old %d exchanges, new %d)\n", store, i, len(old.exchanges), len(new.exchanges))
			continue
		}
		o, w := old.exchanges[i], new.exchanges[i]
		ob, nb := om.body(o.Body), nm.body(w.Body)
		if list {
			fmt.Fprintf(out, "[%s] %2d %-26s %s %s -> %d %s\n", store, i, o.Step, o.Method, o.Path, o.Status, firstBytes(ob))
		}
		if o.Step == w.Step && o.Method == w.Method && o.Path == w.Path && o.Status == w.Status &&
			o.ContentType == w.ContentType && o.RetryAfter == w.RetryAfter && bytes.Equal(ob, nb) {
			continue
		}
		diffs++
		fmt.Fprintf(out, "[%s] exchange %d, step %q, %s %s\n", store, i, o.Step, o.Method, o.Path)
		at, ow, nw := firstDifference(ob, nb)
		fmt.Fprintf(out, "  old (%s): %d ct=%q retry-after=%q body from byte %d: %s\n", commit, o.Status, o.ContentType, o.RetryAfter, at, ow)
		fmt.Fprintf(out, "  new (tree):   %d ct=%q retry-after=%q body from byte %d: %s\n", w.Status, w.ContentType, w.RetryAfter, at, nw)
	}
	if !slices.Equal(old.failed, new.failed) {
		diffs++
		fmt.Fprintf(out, "[%s] failed steps differ: old %q, new %q\n", store, old.failed, new.failed)
	}
	fmt.Fprintf(out, "[%s] %d exchanges compared, %d differences (steps that failed on the old side: %q)\n", store, n, diffs, old.failed)
	return diffs
}

// shown is how many bytes of each body firstDifference shows.
const shown = 160

// firstDifference returns where the masked bodies a and b first differ
// (their common prefix, less a little for context) and each body from
// there, cut to a readable length.
func firstDifference(a, b []byte) (int, []byte, []byte) {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	at := max(0, i-40)
	cut := func(x []byte) []byte {
		if at >= len(x) {
			return nil
		}
		return x[at:min(len(x), at+shown)]
	}
	return at, cut(a), cut(b)
}

// firstBytes is the start of a body, for the --list overview.
func firstBytes(b []byte) []byte { return b[:min(len(b), 90)] }
