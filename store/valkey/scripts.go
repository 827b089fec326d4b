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
// Every script receives the keys of scriptKeys (less the test clock lever
// on a production store: declaredKeys), in that order and under the
// store's hash-tagged prefix; a script that remembers its answer (see
// remembers) receives one more key after them, its caller's memo of the
// operation, and a request id before its own arguments (memo.go).

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
	run            executor
	// once is run for a charged call of an admitting write that keeps no
	// memo (fetch): valkey-go never re-sends it, since a re-run after a
	// lost reply would spend a second request; the caller retries, and
	// the re-run answers alike.
	once executor
}

func isReadOnly(op store.Op) bool {
	switch op {
	case store.OpNow, store.OpJob, store.OpJobs, store.OpPending, store.OpResults, store.OpPresence, store.OpRunners,
		store.OpJobSummaries, opResultsVersion, opResultBodies, opResultChanges:
		return true
	}
	return false
}

// isListing marks the read scripts whose reply may be large. valkey-go
// retries any read-only command after a lost reply, which would run such
// a script again on a server that already spent the time; a listing's
// caller polls again instead.
func isListing(op store.Op) bool {
	switch op {
	case store.OpJobs, store.OpPending, store.OpResults, store.OpRunners, store.OpJobSummaries, opResultBodies:
		return true
	}
	return false
}

func isRemembering(op store.Op) bool {
	_, ok := memoCaller[op]
	return ok
}

// isAdmitting marks the operations that check an admission
// (store.Admission) within their own script: every daemon-plane write
// and the site plane's (whose admissions only charge). Each receives the rate bucket its
// admission may charge as one more key, after the memo if it has one,
// and the admission's arguments (admissionArgs) after the request id.
func isAdmitting(op store.Op) bool {
	switch op {
	case store.OpClaim, store.OpFetch, store.OpResult, store.OpRelease, store.OpTouch, store.OpPair, store.OpHeartbeat,
		store.OpEnqueue, store.OpPayload, store.OpCancel:
		return true
	}
	return false
}

// takesBucket marks the scripts that receive a rate bucket as K.bucket.
func takesBucket(op store.Op) bool { return isAdmitting(op) || op == opBucket }

// admitHeader binds ADMIT, which admit reads: the admission's arguments,
// taken off the front of ARGV (after the request id).
const admitHeader = "local ADMIT = {}\n" +
	"for _, name in ipairs({ 'runner', 'paired', 'owner', 'device', 'charge', 'every', 'burst',\n" +
	"  'pair', 'pair_owner', 'pair_device', 'caps', 'caps_given', 'withheld', 'withheld_given' }) do\n" +
	"  ADMIT[name] = table.remove(ARGV, 1)\n" +
	"end\n"

// admitFirst runs before an admitting script's own code.
const admitFirst = "local refusal = admit()\nif refusal then\n  return refusal\nend\n"

// scripted lists the operations that run a script: all but Ping, which
// is the server's own PING, and every Pairings operation.
func scripted() []store.Op {
	var out []store.Op
	for _, op := range append(store.Ops(), store.PairingOps()...) {
		if op != store.OpPing {
			out = append(out, op)
		}
	}
	return append(out, storeOnlyOps...)
}

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
// clock_now of testclock.lua, which obeys the test clock lever.
func buildScripts(testClock bool) (map[store.Op]*script, error) {
	defs, err := scriptDefs(testClock)
	if err != nil {
		return nil, err
	}
	keys := declaredKeys(testClock)
	out := map[store.Op]*script{}
	for _, op := range scripted() {
		sc, err := loadScript(op, defs, keys)
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
		defs = withTestClock(defs)
	}
	return defs, nil
}

// loadScript builds one operation's script from its file and the shared
// definitions defs, binding keys (declaredKeys) in order.
func loadScript(op store.Op, defs []helper, keys []string) (*script, error) {
	body, err := luaFiles.ReadFile(string(op) + ".lua")
	if err != nil || op == "common" {
		return nil, fmt.Errorf("valkey store: no script for operation %q", op)
	}
	sc := &script{op: op, readOnly: isReadOnly(op), remembers: isRemembering(op)}
	var b strings.Builder
	b.WriteString("-- relayd script: " + string(op) + "\nlocal K = {\n")
	for i, k := range keys {
		fmt.Fprintf(&b, "  %s = KEYS[%d],\n", k, i+1)
	}
	next := len(keys) + 1
	if sc.remembers {
		fmt.Fprintf(&b, "  memo = KEYS[%d],\n", next)
		next++
	}
	if takesBucket(op) {
		fmt.Fprintf(&b, "  bucket = KEYS[%d],\n", next)
		next++
	}
	if takesRoutes(op) {
		fmt.Fprintf(&b, "  routes = KEYS[%d],\n", next)
	}
	b.WriteString("}\n")
	code := string(body)
	if isAdmitting(op) {
		code = admitFirst + code
	}
	if op == store.OpClaim {
		code = claimFirst + code
	}
	if sc.remembers {
		b.WriteString(memoHeader(op))
		code = "return answer_once(function()\n" + code + "\nend)\n"
	}
	if isAdmitting(op) {
		b.WriteString(admitHeader)
	}
	sc.bindings = strings.TrimPrefix(b.String(), "-- relayd script: "+string(op)+"\n")
	sc.code = code
	for _, d := range helpersFor(defs, code) {
		b.WriteString(d.text)
	}
	b.WriteString("\n-- operation: " + string(op) + "\n")
	b.WriteString(code)
	sc.source = b.String()
	switch {
	case isListing(op), op == opBucket:
		// The bucket too: a retry after a lost reply would take a second
		// request, where a refusal costs the caller one retry.
		// FCALL without the read-only flag or the retryable tag is the
		// one script call valkey-go never re-sends by itself.
		sc.run = newFcall(op, callPlain)
	case sc.readOnly:
		sc.run = newFcall(op, callReadOnly)
	default:
		// Retryable: every write script is safe to re-run with the same
		// arguments, which is what a retry after a lost reply is.
		sc.run = newFcall(op, callRetryable)
		if isAdmitting(op) && !sc.remembers {
			sc.once = newFcall(op, callPlain)
		}
	}
	return sc, nil
}

// A helper is one top-level definition (of the schema or the shared
// helpers) with the comment above it.
type helper struct {
	names []string
	text  string
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
	var mark func(text string)
	mark = func(text string) {
		for _, id := range identifier.FindAllString(luaComment.ReplaceAllString(text, ""), -1) {
			if i, ok := defined[id]; ok && !used[i] {
				used[i] = true
				mark(all[i].text)
			}
		}
	}
	mark(body)
	var out []helper
	for i, h := range all {
		if used[i] {
			out = append(out, h)
		}
	}
	return out
}
