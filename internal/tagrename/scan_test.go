package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// texts returns the tags scanLine finds, as written.
func texts(line string) []string {
	var out []string
	for _, t := range scanLine(line) {
		out = append(out, t.identHead+t.text)
	}
	return out
}

func TestScanFindsTagsAndNotTheirLookalikes(t *testing.T) {
	cases := map[string]string{
		"// the routing table (A1.3, G15) and D3":                      "A1.3 G15 D3",
		"decisions D1-D11 and A1–A10":                                  "D1 D11 A1 A10",
		"func TestD1_RetryAfterIsSeconds(t *testing.T) { // D1":        "TestD1 D1",
		"func TestA03A04_BothRulesHold(t *testing.T) {":                "TestA03A04",
		`s.run("D12_WithdrawnConsentStopsHeldWork: v2: …")`:            "D12",
		"P2 R4.1.3, V2.1.3 and ST9; S15":                               "R4.1.3 V2.1.3 ST9 S15",
		"X25519, Ed25519, SHA-256, UTF-8, AES-128, P50, U+E000, V0 V2": "",
		"ABCD-EF12 %C2%A0 BYOLLM-CSM7 G-R16 DG1 v0.1.1 K1 L2":          "",
		"RB-A9, P2-D1/v0, RD-D12, TestP2_D1_X, RD_D12_Y, P2-A1–P2-A10": "",
	}
	for line, want := range cases {
		if got := strings.Join(texts(line), " "); got != want {
			t.Errorf("%q: found %q, want %q", line, got, want)
		}
	}
}

func TestRenameDecidesEachFamilyAsTheGlossarySays(t *testing.T) {
	r := defaultRules()
	cases := []struct{ file, line, want string }{
		{"plane/codec0/daemon.go", "// the daemon-plane auth pipeline (A3, with G7)", "// the daemon-plane auth pipeline (RB-A3, with RB-G7)"},
		{"plane/v2_decisions_test.go", "func TestA9_ProtocolZeroStillNeedsAPairing(t *testing.T) {", "func TestP2_A9_ProtocolZeroStillNeedsAPairing(t *testing.T) {"},
		{"docs/security.md", "device record revoked (403, A7) or remove it (401, G7 and D7).", "device record revoked (403, P2-A7) or remove it (401, RB-G7 and P2-D7)."},
		{"plane/refusals_test.go", "func TestSkew(t *testing.T) { // A2.5, D3", "func TestSkew(t *testing.T) { // RB-A2.5, RB-D3"},
		{"plane/admin.go", "// approval without a control plane (decision D3)", "// approval without a control plane (decision P2-D3)"},
		{"README.md", "(decisions D3, D13, D14)", "(decisions P2-D3, RD-D13, RD-D14)"},
		{"store/storetest/claim2.go", "// G1, R4.4.1", "// P2-G1, P2-R4.4.1"},
		{"docs/architecture.md", "(G4, protocol-2 §2.4.1).", "(RB-G4, protocol-2 §2.4.1)."},
		{"plane/codec2/codec.go", "// decisions D1-D11 (§10)", "// decisions P2-D1–P2-D11 (§10)"},
		{"plane/differences_test.go", "func TestA03_BodyIsRefused(t *testing.T) {", "func TestRB_A03_BodyIsRefused(t *testing.T) {"},
		{"projection/projection_test.go", `site := "S1" // F25`, `site := "S1" // RB-F25`},
		{"interop/README.md", "D001 and D011 are the tool's; D11 is not", "D001 and D011 are the tool's; P2-D11 is not"},
		{"README.md", "| D1 | `WireError.retryAfter` is defined | (`TestD1_X`) |", "| P2-D1/v0 | `WireError.retryAfter` is defined | (`TestP2_D1_X`) |"},
		{"README.md", "| E | the debug page is public |", "| RB-E | the debug page is public |"},
	}
	for _, c := range cases {
		res := r.renameFile(c.file, c.line+"\n") // a line, not a Go file to format
		if got := strings.TrimSuffix(res.text, "\n"); got != c.want || len(res.unclassified) > 0 {
			t.Errorf("%s: %q\n got %q, %d unclassified\nwant %q", c.file, c.line, got, len(res.unclassified), c.want)
		}
	}
}

func TestAnAmbiguousTagWithNoRuleIsReportedAndLeftAlone(t *testing.T) {
	r := defaultRules()
	for file, tag := range map[string]string{"newpkg/new.go": "A4", "store/memory/new.go": "G1"} {
		line := "// a new file citing " + tag + " bare\n"
		res := r.renameFile(file, line)
		if res.text != line || len(res.unclassified) != 1 || res.unclassified[0].old != tag {
			t.Errorf("%s: got %q with %+v, want the line unchanged and %s reported", file, res.text, res.unclassified, tag)
		}
	}
}

// TestASecondRunChangesNothing renames every file of the repository in
// memory, then renames the result again: the second pass must find
// nothing to do.
func TestASecondRunChangesNothing(t *testing.T) {
	root := moduleRoot(t)
	files, err := trackedFiles(root)
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	r := defaultRules()
	for _, file := range files {
		once, err := r.renameSource(file, readFile(t, filepath.Join(root, file)))
		if err != nil {
			t.Fatal(err)
		}
		twice, err := r.renameSource(file, once.text)
		if err != nil {
			t.Fatal(err)
		}
		if twice.text != once.text || len(twice.changes) > 0 {
			t.Errorf("%s: a second run changes %d tags, e.g. %+v", file, len(twice.changes), twice.changes)
		}
	}
}

// moduleRoot is the directory holding go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
