package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// colliding reports whether a tag belongs to a family whose bare name
// means different things in two documents, or in the README's two
// tables: A1–A10, D1–D14 and G1–G6.
func colliding(t tag) bool {
	n := t.n()
	return t.dots == "" && !leadingZero(t.num) &&
		(t.family == "A" && n >= 1 && n <= 10 || t.family == "D" && n >= 1 && n <= 14 || t.family == "G" && n >= 1 && n <= 6)
}

// TestNoBareCollidingTag keeps the names docs/glossary.md set out: a
// tag that could mean two things carries its document's prefix (RB-A9,
// P2-A9, P2-D1, RD-D12, TestP2_D1_…). The glossary, which explains the
// old names, and this tool's tables are the only places a bare one may
// stand. A failure names the line; `go run ./internal/tagrename -w`
// renames it, or a rule in rules.go decides it.
func TestNoBareCollidingTag(t *testing.T) {
	root := moduleRoot(t)
	files, err := trackedFiles(root)
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	r := defaultRules()
	if len(files) < 50 {
		t.Fatalf("checked only %d files", len(files))
	}
	for _, file := range files {
		for i, line := range strings.Split(readFile(t, filepath.Join(root, file)), "\n") {
			tags := scanLine(line)
			for _, tg := range tags {
				if colliding(tg) && !r.classify(file, line, tags, tg).skip {
					t.Errorf("%s:%d: bare %s%s (docs/glossary.md): %s", file, i+1, tg.identHead, tg.text, strings.TrimSpace(line))
				}
			}
		}
	}
}

// TestTheGuardSeesABareTag: the guard's scan finds what it must refuse.
func TestTheGuardSeesABareTag(t *testing.T) {
	var found []string
	for _, tg := range scanLine(`// A9, D1, D14, G1 and TestD3_X; not RB-A9, P2-D1, G7, D001 or "D12_Y`) {
		if colliding(tg) {
			found = append(found, tg.identHead+tg.text)
		}
	}
	if got := strings.Join(found, " "); got != "A9 D1 D14 G1 TestD3 D12" {
		t.Errorf("the guard sees %q", got)
	}
}
