package lua

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestScripts checks every operation loads, names only keys it receives,
// and that each write reads the clock exactly once, before anything else.
func TestScripts(t *testing.T) {
	keyRef := regexp.MustCompile(`\bK\.([a-z_]+)`)
	for _, name := range Names() {
		s, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		body, err := files.ReadFile(name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		// The shared helpers may name the request key; only a remembering
		// operation may use them that way.
		for _, m := range keyRef.FindAllStringSubmatch(string(body), -1) {
			k := m[1]
			if !slices.Contains(Keys(), k) && !(k == "req" && s.Remembers) {
				t.Errorf("%s uses K.%s, which it is not passed", name, k)
			}
		}
		calls := strings.Count(string(body), "clock_now()")
		if !s.ReadOnly || name == Now {
			if calls != 1 {
				t.Errorf("%s reads the clock %d times, want once", name, calls)
			}
			code := strings.TrimSpace(regexp.MustCompile(`(?m)^--.*$`).ReplaceAllString(string(body), ""))
			if !strings.HasPrefix(code, "local now = clock_now()") && !strings.HasPrefix(code, "return clock_now()") {
				t.Errorf("%s does not read the clock first", name)
			}
		} else if calls != 0 {
			t.Errorf("read %s reads the clock", name)
		}
		if s.Remembers != strings.Contains(string(body), "remember(") {
			t.Errorf("%s: Remembers is %v but the script says otherwise", name, s.Remembers)
		}
		if !strings.Contains(s.Source, "KEYS[") {
			t.Errorf("%s has no key header", name)
		}
	}
	common, _ := files.ReadFile("common.lua")
	for _, m := range keyRef.FindAllStringSubmatch(string(common), -1) {
		if !slices.Contains(Keys(), m[1]) && m[1] != "req" {
			t.Errorf("common.lua uses K.%s, which no script is passed", m[1])
		}
	}
	if _, err := Load("common"); err == nil {
		t.Error("the shared helpers are not an operation")
	}
	if _, err := Load("nope"); err == nil {
		t.Error("unknown operation loaded")
	}
}

// TestScriptsCarryOnlyTheHelpersTheyUse: every helper definition runs on
// every call, so a script carries the helpers its code names, directly or
// through other helpers, and no others, in common.lua's order.
func TestScriptsCarryOnlyTheHelpersTheyUse(t *testing.T) {
	defines := func(name, helper string) bool {
		s, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(s.Source, "\nlocal function "+helper+"(")
	}
	// take_payload names held; held needs live, settle, drop, queue_out
	// and, through them, refusal_member.
	for _, h := range []string{"held", "live", "settle", "drop", "queue_out", "refusal_member", "clock_now"} {
		if !defines(TakePayload, h) {
			t.Errorf("take_payload lacks %s, which it uses", h)
		}
	}
	for _, h := range []string{"sweep", "valid_stub", "site_page", "read_jobs"} {
		if defines(TakePayload, h) {
			t.Errorf("take_payload carries %s, which it never uses", h)
		}
	}
	if !defines(Claim, "sweep") || !defines(Claim, "valid_stub") {
		t.Error("claim lacks its sweep or stub check")
	}
	if defines(Touch, "decode_job") || !defines(Touch, "decode_presence") {
		t.Error("touch carries job records or lacks presence records")
	}
	s, _ := Load(TakePayload)
	if strings.Index(s.Source, "local function live(") > strings.Index(s.Source, "local function held(") {
		t.Error("helpers are not in common.lua's order")
	}
	// Uses are found with comments stripped line by line, which is right
	// only while no string literal holds "--": a line cut inside a string
	// would leave its quotes unbalanced.
	entries, err := files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		src, _ := files.ReadFile(e.Name())
		for i, line := range strings.Split(string(src), "\n") {
			code := luaComment.ReplaceAllString(line, "")
			if strings.Count(code, "'")%2 != 0 || strings.Count(code, `"`)%2 != 0 {
				t.Errorf("%s:%d: a string holds \"--\", or quotes are unbalanced: %s", e.Name(), i+1, line)
			}
		}
	}
	// Comments name helpers too; they must not pull them in.
	if got := helpersFor("local function a()\nend\n-- b is not used\nlocal function b()\nend\n", "-- a and b\nreturn a()"); len(got) != 1 || got[0].names[0] != "a" {
		t.Errorf("helpers for a body calling a: %+v", got)
	}
}
