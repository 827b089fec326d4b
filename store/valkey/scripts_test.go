package valkey

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/lua"
)

// loadForTest builds one operation's script as the store does.
func loadForTest(t *testing.T, op store.Op) *script {
	t.Helper()
	scripts, err := loadScripts()
	if err != nil {
		t.Fatal(err)
	}
	sc, ok := scripts[op]
	if !ok {
		t.Fatalf("no script for %s", op)
	}
	return sc
}

// TestScripts checks every operation loads, names only keys it receives,
// and that each write reads the clock exactly once, before anything else.
func TestScripts(t *testing.T) {
	keyRef := regexp.MustCompile(`\bK\.([a-z_]+)`)
	for _, name := range scripted() {
		s := loadForTest(t, name)
		body, err := luaFiles.ReadFile(string(name) + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		// The shared helpers name the caller's memo; only a remembering
		// operation is passed it.
		for _, m := range keyRef.FindAllStringSubmatch(string(body), -1) {
			k := m[1]
			if !slices.Contains(scriptKeys(), k) && !(k == "memo" && s.remembers) && !(k == "bucket" && operations[name].takesBucket()) && !(k == "routes" && operations[name].routes) && !(k == "held" && operations[name].held) {
				t.Errorf("%s uses K.%s, which it is not passed", name, k)
			}
		}
		calls := strings.Count(string(body), "clock_now()")
		if name == opBucket {
			// A limiter's call reads the buckets' clock, once, in take_token.
			if !strings.HasPrefix(strings.TrimSpace(regexp.MustCompile(`(?m)^--.*$`).ReplaceAllString(string(body), "")), "local wait = take_token(") {
				t.Errorf("%s does not take its token first", name)
			}
		} else if name == opRoutes {
			// Storing a claim's route list decides nothing by time.
			if calls != 0 {
				t.Errorf("%s reads the clock", name)
			}
		} else if !s.readOnly || name == store.OpNow {
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
		if s.remembers != strings.Contains(s.source, "return answer_once(function()") {
			t.Errorf("%s: remembers is %v but the script says otherwise", name, s.remembers)
		}
		// A script that reads no key (now, on TIME alone) still binds K.
		if !strings.Contains(s.source, "local K = {") {
			t.Errorf("%s has no key header", name)
		}
	}
	common, err := lua.Shared()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range keyRef.FindAllStringSubmatch(common, -1) {
		if !slices.Contains(scriptKeys(), m[1]) && m[1] != "memo" && m[1] != "bucket" && m[1] != "routes" {
			t.Errorf("the shared helpers use K.%s, which no script is passed", m[1])
		}
	}
	if _, err := loadScript("common", operations["common"], nil, "", nil, nil); err == nil {
		t.Error("the shared helpers are not an operation")
	}
	if _, err := loadScript("nope", operations["nope"], nil, "", nil, nil); err == nil {
		t.Error("unknown operation loaded")
	}
	// Every file but the sections in common/ is an operation's script.
	entries, err := luaFiles.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".lua")
		if name != "common" && !slices.Contains(scripted(), store.Op(name)) {
			t.Errorf("lua/%s is no operation's script", e.Name())
		}
	}
}

// TestScriptsCarryOnlyTheHelpersTheyUse: every helper definition runs on
// every call, so a script carries the helpers its code names, directly or
// through other helpers, and no others, in the shared helpers' order.
func TestScriptsCarryOnlyTheHelpersTheyUse(t *testing.T) {
	defines := func(name store.Op, helper string) bool {
		return strings.Contains(loadForTest(t, name).source, "\nlocal function "+helper+"(")
	}
	// fetch names held; held needs live, settle, drop, queue_out and,
	// through them, refusal_member.
	for _, h := range []string{"held", "live", "settle", "drop", "queue_out", "refusal_member", "clock_now"} {
		if !defines(store.OpFetch, h) {
			t.Errorf("fetch lacks %s, which it uses", h)
		}
	}
	for _, h := range []string{"sweep", "valid_stub", "site_page", "read_jobs"} {
		if defines(store.OpFetch, h) {
			t.Errorf("fetch carries %s, which it never uses", h)
		}
	}
	if !defines(store.OpClaim, "sweep") || !defines(store.OpClaim, "valid_stub") {
		t.Error("claim lacks its sweep or stub check")
	}
	if defines(store.OpTouch, "decode_job") || !defines(store.OpTouch, "decode_presence") {
		t.Error("touch carries job records or lacks presence records")
	}
	s := loadForTest(t, store.OpFetch)
	if strings.Index(s.source, "local function live(") > strings.Index(s.source, "local function held(") {
		t.Error("helpers are not in the shared helpers' order")
	}
	// Uses are found with comments stripped line by line, which is right
	// only while no string literal holds "--": a line cut inside a string
	// would leave its quotes unbalanced.
	for name, src := range luaSources(t) {
		for i, line := range strings.Split(src, "\n") {
			code := luaComment.ReplaceAllString(line, "")
			if strings.Count(code, "'")%2 != 0 || strings.Count(code, `"`)%2 != 0 {
				t.Errorf("%s:%d: a string holds \"--\", or quotes are unbalanced: %s", name, i+1, line)
			}
		}
	}
	// Comments name helpers too; they must not pull them in.
	if got := helpersFor(splitHelpers("local function a()\nend\n-- b is not used\nlocal function b()\nend\n"), "-- a and b\nreturn a()"); len(got) != 1 || got[0].names[0] != "a" {
		t.Errorf("helpers for a body calling a: %+v", got)
	}
}

// luaSources returns every Lua file of store/lua, the sections of the
// shared helpers included, by its path there.
func luaSources(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := fs.WalkDir(luaFiles, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := luaFiles.ReadFile(name)
		out[name] = string(src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestScriptsReceiveOnlyTheKeysTheyRead: each script is sent the fixed
// keys it or its helpers read, not all of them, and its header binds
// exactly those; a read-only listing reads far fewer than a claim.
func TestScriptsReceiveOnlyTheKeysTheyRead(t *testing.T) {
	scripts, err := loadScripts()
	require.NoError(t, err)
	all := declaredKeys(false)
	for op, sc := range scripts {
		for _, k := range sc.keyNames {
			require.Contains(t, all, k, op)
			require.Contains(t, sc.source, "K."+k, "%s receives %s, which it never reads", op, k)
		}
		for _, k := range all {
			if !slices.Contains(sc.keyNames, k) {
				require.NotContains(t, sc.bindings, " "+k+" = KEYS[", "%s binds %s without receiving it", op, k)
			}
		}
	}
	require.Less(t, len(scripts[store.OpNow].keyNames), len(all)/4, "now reads the clock alone")
	require.Less(t, len(scripts[opResultsVersion].keyNames), len(scripts[store.OpClaim].keyNames))
}
