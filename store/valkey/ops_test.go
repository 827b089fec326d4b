package valkey

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/lua"
)

// sharedDefs returns the definitions every script is built from, as
// buildScripts reads them.
func sharedDefs(t *testing.T) []helper {
	t.Helper()
	schema, err := schemaLua()
	require.NoError(t, err)
	common, err := lua.Shared()
	require.NoError(t, err)
	return append(splitHelpers(schema), splitHelpers(common)...)
}

// touchExtraArgs declares touch's argument and one its script never reads.
type touchExtraArgs struct {
	Runner string `lua:"runner"`
	Extra  string `lua:"extra"`
}

func (touchExtraArgs) op() store.Op { return store.OpTouch }

// TestArgumentMismatchFailsAtLoad: a script and its params struct that
// disagree on an argument's name do not load, whichever side has it; so
// does a script reading ARGV by place, or an admission it is not sent.
func TestArgumentMismatchFailsAtLoad(t *testing.T) {
	defs := sharedDefs(t)
	keys := declaredKeys(false)
	admit, err := planOf(admissionArgs{})
	require.NoError(t, err)
	body, err := luaFiles.ReadFile("touch.lua")
	require.NoError(t, err)
	touch := operations[store.OpTouch]
	_, err = loadScript(store.OpTouch, touch, admit, string(body), defs, keys)
	require.NoError(t, err, "touch as it is loads")

	renamed := strings.Replace(string(body), "A.runner", "A.runner_id", 1)
	_, err = loadScript(store.OpTouch, touch, admit, renamed, defs, keys)
	require.ErrorContains(t, err, "A.runner_id read but not declared")

	extra := touch
	extra.args = touchExtraArgs{}
	_, err = loadScript(store.OpTouch, extra, admit, string(body), defs, keys)
	require.ErrorContains(t, err, "A.extra declared by touchExtraArgs and never read")

	byPlace := strings.Replace(string(body), "A.runner", "ARGV[1]", 1)
	_, err = loadScript(store.OpTouch, touch, admit, byPlace, defs, keys)
	require.ErrorContains(t, err, "reads ARGV[1]")

	// A comment naming an argument is no use of it.
	commented := string(body) + "\n-- A.ghost is named, not read\n"
	_, err = loadScript(store.OpTouch, touch, admit, commented, defs, keys)
	require.NoError(t, err)

	renew := operations[store.OpRenew]
	renewBody, err := luaFiles.ReadFile("renew.lua")
	require.NoError(t, err)
	_, err = loadScript(store.OpRenew, renew, admit, string(renewBody)+"\nlocal _ = ADMIT.runner\n", defs, keys)
	require.ErrorContains(t, err, "checks no admission")

	// The admission's names are checked against admit's uses too.
	short, err := planOf(struct {
		Runner string `lua:"runner"`
	}{})
	require.NoError(t, err)
	_, err = loadScript(store.OpTouch, touch, short, string(body), defs, keys)
	require.ErrorContains(t, err, "ADMIT.")
}

// TestArgPlanRejectsWhatItCannotBind: every field is named, of a type
// that travels, and in an order a binding can follow.
func TestArgPlanRejectsWhatItCannotBind(t *testing.T) {
	for name, v := range map[string]any{
		"untagged": struct{ Runner string }{},
		"bad name": struct {
			Runner string `lua:"Runner"`
		}{},
		"twice": struct {
			A string `lua:"a"`
			B string `lua:"a"`
		}{},
		"float": struct {
			F float64 `lua:"f"`
		}{},
		"value after a list": struct {
			L []string `lua:"l,counted"`
			V string   `lua:"v"`
		}{},
		"after the tail": struct {
			T []string `lua:"t,tail"`
			L []string `lua:"l,counted"`
		}{},
		"list without a form": struct {
			L []string `lua:"l"`
		}{},
		"not a struct": "runner",
	} {
		if _, err := planOf(v); err == nil {
			t.Errorf("%s: planned", name)
		}
	}
}

// TestBindingsReadWhatPackSends runs each binding form on the server: the
// values, a counted list and the tail after it read back as Go packed them,
// behind a request id and an admission as a remembering admitted write's.
func TestBindingsReadWhatPackSends(t *testing.T) {
	client := valkeytest.Start(t).Client(t)
	plan, err := planOf(claimArgs{})
	require.NoError(t, err)
	in := claimArgs{Runner: "r1", Owner: "", Device: "{}", LeaseMs: -5, Max: 3, Touch: true, Proto: store.Proto2,
		HasRoutes: false, Kinds: []string{"k1", "", "k3"}, Leases: []string{"l1", "l2"}}
	args := plan.pack([]string{"req"}, in)
	src := plan.binding("A", 2) + `
local kinds = table.concat(A.kinds, ',')
local leases = {}
for i = A.leases, #ARGV do
  leases[#leases + 1] = ARGV[i]
end
return { A.runner, A.owner, A.device, A.lease_ms, A.max, A.touch, A.proto, A.has_routes, A.hold,
  tostring(#A.kinds), kinds, table.concat(leases, ',') }`
	got, err := client.Do(t.Context(), client.B().Eval().Script(src).Numkeys(0).Arg(args...).Build()).AsStrSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"r1", "", "{}", "-5", "3", "1", "2", "0", "0", "3", "k1,,k3", "l1,l2"}, got)

	// A tail alone is bound to its first place.
	routes, err := planOf(routesArgs{})
	require.NoError(t, err)
	require.Contains(t, routes.binding("A", 1), "fields = 1,")
}

// TestEveryOperationHasOneEntry: the table holds each scripted operation
// of the store's interfaces and the store's own steps, and nothing else;
// each entry's arguments are its operation's.
func TestEveryOperationHasOneEntry(t *testing.T) {
	var want []store.Op
	for _, op := range append(store.Ops(), store.PairingOps()...) {
		if op != store.OpPing {
			want = append(want, op)
		}
	}
	want = append(want, opResultsVersion, opResultBodies, opResultChanges, opBucket, opRoutes, opHeld, opHinted)
	slices.Sort(want)
	require.Equal(t, want, scripted())
	for op, spec := range operations {
		require.NoError(t, spec.check(op))
		require.Equal(t, op, spec.args.op())
	}
	bad := operations[store.OpTouch]
	bad.alike = "also alike"
	require.Error(t, bad.check(store.OpTouch), "a remembered write that also answers alike")
	require.Error(t, operations[store.OpTouch].check(store.OpPair), "touch's entry under pair")
}

// TestMisbuiltCallsAreNotSent: a call built against its entry fails before
// it reaches the server, as a call of an admitting write sent without its
// admission does.
func TestMisbuiltCallsAreNotSent(t *testing.T) {
	s := newTestStore(t, valkeytest.Start(t).Client(t))
	ctx := t.Context()
	var sent []store.Op
	s.onCall = func(c call) { sent = append(sent, c.op) }
	_, err := s.exec(ctx, s.newCall(touchArgs{Runner: "r1"}))
	require.ErrorContains(t, err, "remembering")
	_, err = s.exec(ctx, s.newWrite("r1", sweepArgs{Batch: 1}))
	require.ErrorContains(t, err, "remembering")
	_, err = s.exec(ctx, s.newWrite("r1", touchArgs{Runner: "r1"}))
	require.ErrorContains(t, err, "without its admission")
	_, err = s.admitted(s.newCall(sweepArgs{Batch: 1}), "r1", nil)
	require.ErrorContains(t, err, "checks no admission")
	require.Empty(t, sent)
	_, err = s.execAdmitted(ctx, s.newWrite("r1", touchArgs{Runner: "r1"}), "r1", nil)
	require.NoError(t, err)
	require.Equal(t, []store.Op{store.OpTouch}, sent)
}
