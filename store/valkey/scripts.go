package valkey

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/lua"
)

// The scripts live in store/lua, one file per operation named by its store.Op,
// beside common/, the sections of the helpers they share (lua.Shared). Each
// is built whole: a header that binds the keys it receives, the schema
// definitions and the shared helpers it uses, then the operation itself, so every rule
// is written once and every operation is one atomic call. The store runs
// them as the functions of one library (functions.go), which defines the
// schema and helpers once and runs each operation's header and code per
// call.
//
// Every script receives those keys of scriptKeys (less the test clock
// lever on a production store: declaredKeys) that it or a helper it uses
// reads (keysRead), in that order and under the store's hash-tagged
// prefix: sending and binding all 40 on every call cost a sixth of a
// job's server instructions. Then come those its entry in operations (ops.go)
// names: its caller's memo of the operation for a write that remembers
// its answer (memo.go), the rate bucket for one that checks an admission,
// a claim's route list. Its ARGV is a request id (remembering writes), an
// admission's arguments (admitting writes), then its own, each bound by
// name in the header from its params struct (argplan.go).

// luaFiles holds the scripts (package store/lua).
var luaFiles = lua.Files

// script is one operation ready to run.
type script struct {
	op store.Op
	// source is the whole script as one EVAL would run it: key header,
	// definitions, operation. The store calls the operation's function in
	// the library instead (functions.go); source is what that function
	// runs, with the definitions it uses, for tests and measurements.
	source string
	// readOnly scripts change nothing: their functions carry the no-writes
	// flag, and most are called with FCALL_RO (not the listings).
	readOnly bool
	// remembers marks a write whose answer a re-run could not give again
	// from the state the first run left. It runs inside answer_once, which
	// keeps the first answer in the caller's memo, so that re-running the
	// call with the same arguments returns it and changes nothing.
	remembers bool
	// bindings is the part of source's header that binds K and the
	// operation's other inputs, and code the operation as it runs after
	// the definitions: the library's function of op is made of the two
	// (functions.go).
	bindings, code string
	// keyNames are the names of the fixed keys the script receives, in
	// order, before its memo, bucket and routes (keysRead).
	keyNames []string
	run      executor
	// once is run for a charged call of an admitting write that keeps no
	// memo (fetch): valkey-go never re-sends it, since a re-run after a
	// lost reply would spend a second request; the caller retries, and
	// the re-run answers alike.
	once executor
	// args is the layout of the operation's arguments (its params
	// struct); admit, that of an admitting write's admission, nil for
	// the others, whose arguments start at admitAt (0-based) in ARGV.
	args    *argPlan
	admit   *argPlan
	admitAt int
}

// admitFirst runs before an admitting script's own code.
const admitFirst = "local refusal = admit()\nif refusal then\n  return refusal\nend\n"

// scriptKeys names the fixed keys every script receives as KEYS, in
// order, by the names the scripts know them by (K.<name>); keySuffix
// gives each one's key under the store's prefix. store/lua/common/00_header.lua
// describes them.
func scriptKeys() []string {
	keys := append(append([]string{}, jobKeys...), jobIndexes...)
	keys = append(keys, "seq", "clock", "presence", "paired",
		"pairings", "pairing_expiry", "pairing_identity", "pairing_user")
	for _, k := range jobKeys {
		keys = append(keys, legacyKey+k)
	}
	return keys
}

// jobKeys are the job keys format "1" had too. Format "2" keeps them
// under new names, so that a relay of either format never meets the
// other's entries; the old ones reach the scripts as old_<name>, for the
// sweep to move what an older relay left there.
var jobKeys = []string{"job", "payload", "result", "order", "queue", "deadline", "window", "lease",
	"awaiting", "finished", "cancels", "refusals"}

// jobIndexes are the job indexes format "2" added.
var jobIndexes = []string{"leases", "byid", "unsealed", "sticky", "reoffer", "qcount", "listing", "busy", "changes", "returning"}

const legacyKey = "old_"

// keySuffix is the key, under the store's prefix, of the script key name.
func keySuffix(name string) string {
	if old, ok := strings.CutPrefix(name, legacyKey); ok {
		return old
	}
	if slices.Contains(jobKeys, name) || slices.Contains(jobIndexes, name) {
		return "f2:" + name
	}
	return name
}

// declaredKeys are the keys of scriptKeys a store's scripts receive: the
// test clock lever K.clock only when the store was opened for tests, so a
// production script cannot even name it.
func declaredKeys(testClock bool) []string {
	return slices.DeleteFunc(scriptKeys(), func(k string) bool { return k == "clock" && !testClock })
}

// loadScripts builds every operation's script as production runs it: the
// store clock is Valkey TIME alone.
func loadScripts() (map[store.Op]*script, error) {
	return buildScripts(false)
}

// buildScripts builds every operation's script; testClock swaps in the
// clock_now of the test clock (lua.TestClock), which obeys the lever.
func buildScripts(testClock bool) (map[store.Op]*script, error) {
	defs, err := scriptDefs(testClock)
	if err != nil {
		return nil, err
	}
	admit, err := planOf(admissionArgs{})
	if err != nil {
		return nil, fmt.Errorf("valkey store: %w", err)
	}
	keys := declaredKeys(testClock)
	out := map[store.Op]*script{}
	for _, op := range scripted() {
		body, err := luaFiles.ReadFile(string(op) + ".lua")
		if err != nil {
			return nil, fmt.Errorf("valkey store: no script for operation %q", op)
		}
		sc, err := loadScript(op, operations[op], admit, string(body), defs, keys)
		if err != nil {
			return nil, err
		}
		out[op] = sc
	}
	buildLibrary(defs, out)
	return out, nil
}

// scriptDefs are the schema's and the shared helpers' definitions, with
// the test clock's (testClock) or TIME alone.
func scriptDefs(testClock bool) ([]helper, error) {
	schema, err := schemaLua()
	if err != nil {
		return nil, fmt.Errorf("valkey store: schema: %w", err)
	}
	common, err := lua.Shared()
	if err != nil {
		return nil, fmt.Errorf("valkey store: reading shared helpers: %w", err)
	}
	defs := append(splitHelpers(schema), splitHelpers(common)...)
	if testClock {
		return withTestClock(defs)
	}
	return defs, nil
}

// loadScript builds the script of op, whose entry is spec, from its file
// body and the shared definitions defs, binding keys (declaredKeys) in
// order and its arguments by the names its params struct declares, and
// admit's for an admitting write. It fails when the script and its entry
// disagree: a key or an argument read and not passed, an argument passed
// and not read, or one read by its place in ARGV.
func loadScript(op store.Op, spec opSpec, admit *argPlan, body string, defs []helper, keys []string) (*script, error) {
	if err := spec.check(op); err != nil {
		return nil, err
	}
	args, err := planOf(spec.args)
	if err != nil {
		return nil, fmt.Errorf("valkey store: %s: %w", op, err)
	}
	sc := &script{op: op, readOnly: spec.readOnly, remembers: spec.memo != "", args: args}
	if spec.admits {
		sc.admit = admit
	}
	if sc.remembers {
		sc.admitAt = 1
	}
	code := body
	if spec.admits {
		code = admitFirst + code
	}
	code = spec.prelude + code
	if sc.remembers {
		code = "return answer_once(function()\n" + code + "\nend)\n"
	}
	used := helpersFor(defs, code)
	if err := argsRead(sc, code, used); err != nil {
		return nil, fmt.Errorf("valkey store: %s: %w", op, err)
	}
	sc.keyNames = keysRead(code, used, keys)
	var b strings.Builder
	b.WriteString(keyHeader(op, spec, sc.keyNames))
	b.WriteString(argHeader(sc, spec))
	sc.bindings = strings.TrimPrefix(b.String(), "-- relayd script: "+string(op)+"\n")
	sc.code = code
	for _, d := range used {
		b.WriteString(d.text)
	}
	b.WriteString("\n-- operation: " + string(op) + "\n")
	b.WriteString(code)
	sc.source = b.String()
	wrap(sc, spec)
	return sc, nil
}

// keysRead are the names of keys, in keys' order, that code or the
// helpers it uses read as K.<name>. A script that indexed K by a computed
// name could read any of them, so it gets them all.
func keysRead(code string, used []helper, keys []string) []string {
	var b strings.Builder
	b.WriteString(luaComment.ReplaceAllString(code, ""))
	for _, d := range used {
		b.WriteString("\n" + d.bare)
	}
	text := b.String()
	if keyByComputedName.MatchString(text) {
		return keys
	}
	read := map[string]bool{}
	for _, m := range keyByName.FindAllStringSubmatch(text, -1) {
		read[m[1]] = true
	}
	return slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return !read[k] })
}

var (
	keyByName         = regexp.MustCompile(`\bK\.([A-Za-z_][A-Za-z0-9_]*)`)
	keyByComputedName = regexp.MustCompile(`\bK\s*\[`)
)

// keyHeader binds K to the keys op receives: keys, then its caller's
// memo, its rate bucket and its route list, each when its entry says so.
func keyHeader(op store.Op, spec opSpec, keys []string) string {
	var b strings.Builder
	b.WriteString("-- relayd script: " + string(op) + "\nlocal K = {\n")
	for i, k := range keys {
		fmt.Fprintf(&b, "  %s = KEYS[%d],\n", k, i+1)
	}
	next := len(keys) + 1
	for _, k := range []struct {
		name  string
		takes bool
	}{{"memo", spec.memo != ""}, {"bucket", spec.takesBucket()}, {"routes", spec.routes}, {"held", spec.held}} {
		if k.takes {
			fmt.Fprintf(&b, "  %s = KEYS[%d],\n", k.name, next)
			next++
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// argHeader binds what the script reads of ARGV: a remembering write's
// REQ_ID (with what answer_once reads beside it), an admitting write's
// ADMIT, then A, the operation's own arguments.
func argHeader(sc *script, spec opSpec) string {
	var b strings.Builder
	if sc.remembers {
		b.WriteString(memoHeader(spec.memo))
	}
	at := sc.admitAt + 1
	if sc.admit != nil {
		b.WriteString(sc.admit.binding("ADMIT", at))
		at += len(sc.admit.fields)
	}
	b.WriteString(sc.args.binding("A", at))
	return b.String()
}

// argsRead checks that code, and the helpers it uses, read the script's
// arguments by exactly the names declared, and none by its place. Only
// the helpers that read ARGV or a bound table are scanned: every store
// open builds every script.
func argsRead(sc *script, code string, used []helper) error {
	var b strings.Builder
	b.WriteString(luaComment.ReplaceAllString(code, ""))
	for _, d := range used {
		if strings.Contains(d.text, "ARGV[") || strings.Contains(d.text, "A.") || strings.Contains(d.text, "ADMIT.") {
			b.WriteString("\n" + d.bare)
		}
	}
	text := b.String()
	if m := argvByPlace.FindString(text); m != "" {
		return fmt.Errorf("reads %s: arguments are read by name (A.<name>)", m)
	}
	uses := argUses(text)
	if err := argsAgree("A", sc.args, uses["A"]); err != nil {
		return err
	}
	if sc.admit != nil {
		return argsAgree("ADMIT", sc.admit, uses["ADMIT"])
	}
	if len(uses["ADMIT"]) > 0 {
		return fmt.Errorf("reads ADMIT but checks no admission")
	}
	return nil
}

// wrap makes the script's runners, as its entry says it may be retried.
func wrap(sc *script, spec opSpec) {
	switch {
	case spec.listing, spec.neverResent:
		// The bucket too: a retry after a lost reply would take a second
		// request, where a refusal costs the caller one retry.
		// FCALL without the read-only flag or the retryable tag is the
		// one script call valkey-go never re-sends by itself.
		sc.run = newFcall(sc.op, callPlain)
	case sc.readOnly:
		sc.run = newFcall(sc.op, callReadOnly)
	default:
		// Retryable: every write script is safe to re-run with the same
		// arguments, which is what a retry after a lost reply is.
		sc.run = newFcall(sc.op, callRetryable)
		if spec.admits && !sc.remembers {
			sc.once = newFcall(sc.op, callPlain)
		}
	}
}

// A helper is one top-level definition (of the schema or the shared
// helpers) with the comment above it.
type helper struct {
	names []string
	text  string
	// bare is text without its comments, what the scans of a script's
	// names read (helpersFor, argsRead, keysRead): stripped once per
	// build, not once per operation using the helper.
	bare string
}

var (
	luaComment  = regexp.MustCompile(`--[^\n]*`)
	topLevelDef = regexp.MustCompile(`^local (?:function ([A-Za-z_][A-Za-z0-9_]*)|([A-Za-z_][A-Za-z0-9_]*(?:, *[A-Za-z_][A-Za-z0-9_]*)*) *=)`)
	identifier  = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
)

// splitHelpers cuts Lua text into its top-level definitions, in order.
// Lines before the first definition (the file's own comment) are dropped.
func splitHelpers(common string) []helper {
	var out []helper
	var pending strings.Builder // comment and blank lines awaiting their definition
	for _, line := range strings.SplitAfter(common, "\n") {
		m := topLevelDef.FindStringSubmatch(line)
		switch {
		case m != nil:
			names := []string{m[1]}
			if m[1] == "" {
				names = strings.Split(strings.ReplaceAll(m[2], " ", ""), ",")
			}
			out = append(out, helper{names: names, text: pending.String() + line})
			pending.Reset()
		case strings.HasPrefix(line, "--") || strings.TrimSpace(line) == "":
			if len(out) > 0 || !strings.HasPrefix(line, "--") {
				pending.WriteString(line)
			}
		case len(out) > 0:
			// The body of the current definition; comments inside it were
			// taken as pending and belong to it too.
			out[len(out)-1].text += pending.String() + line
			pending.Reset()
		}
	}
	if len(out) > 0 {
		out[len(out)-1].text += pending.String()
	}
	for i := range out {
		out[i].bare = luaComment.ReplaceAllString(out[i].text, "")
	}
	return out
}

// helpersFor returns the definitions of all that an operation uses,
// directly or through other definitions, in their order in all (Lua
// locals must be defined before use): what an operation's source includes,
// and, over every operation, what the library defines (functions.go).
func helpersFor(all []helper, body string) []helper {
	defined := map[string]int{}
	for i, h := range all {
		for _, n := range h.names {
			defined[n] = i
		}
	}
	used := make([]bool, len(all))
	var mark func(bare string)
	mark = func(bare string) {
		for _, id := range identifier.FindAllString(bare, -1) {
			if i, ok := defined[id]; ok && !used[i] {
				used[i] = true
				mark(all[i].bare)
			}
		}
	}
	mark(luaComment.ReplaceAllString(body, ""))
	var out []helper
	for i, h := range all {
		if used[i] {
			out = append(out, h)
		}
	}
	return out
}
