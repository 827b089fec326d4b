package valkey

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/lua"
)

// rebuilt gives s a library of another build: the same scripts, each with
// a comment more, as the next relay version's would differ.
func rebuilt(t *testing.T, s *Store) {
	t.Helper()
	defs, err := scriptDefs(s.testClock)
	require.NoError(t, err)
	for _, sc := range s.scripts {
		sc.code += "\n-- another build\n"
	}
	buildLibrary(defs, s.scripts)
}

// Two builds on one server, as in a rolling upgrade: each loads its own
// library beside the other's, neither load clobbers the other's functions,
// and deleting one (after a rollout) leaves the other working; a store
// whose library was deleted loads it again.
func TestTwoBuildsShareAServer(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	ctx := t.Context()
	old := newTestStore(t, client)
	next := newTestStore(t, client)
	rebuilt(t, next)
	oldLib, nextLib := libraryOf(old.scripts).name, libraryOf(next.scripts).name
	require.NotEqual(t, oldLib, nextLib)
	require.NotEqual(t, old.scripts[store.OpClaim].function(), next.scripts[store.OpClaim].function())

	require.NoError(t, old.LoadScripts(ctx))
	require.NoError(t, next.LoadScripts(ctx))
	require.ElementsMatch(t, []string{oldLib, nextLib}, libraries(t, client))
	for _, s := range []*Store{old, next, old} {
		mustEnqueue(t, s, "a", "b")
		require.Len(t, mustClaim(t, s, "r1", 1), 1)
		require.NoError(t, s.LoadScripts(ctx), "a load again replaces its own library only")
	}
	require.ElementsMatch(t, []string{oldLib, nextLib}, libraries(t, client))

	require.NoError(t, client.Do(ctx, client.B().FunctionDelete().LibraryName(oldLib).Build()).Error())
	require.Len(t, mustClaim(t, next, "r1", 1), 1, "the new build runs on without the old library")
	require.Equal(t, []string{nextLib}, libraries(t, client))
	require.Len(t, mustClaim(t, old, "r2", 2), 0, "the old build's store loads its library again")
	require.ElementsMatch(t, []string{oldLib, nextLib}, libraries(t, client))

	prod, err := NewFromClient(client, valkeytest.Prefix(t))
	require.NoError(t, err)
	mustEnqueue(t, prod, "c")
	require.Len(t, libraries(t, client), 3, "a production build is a third library")
}

// The library keeps its definitions between calls: a function may assign
// only its bindings and the per-call caches, which it resets at entry, so
// no call sees state an earlier call left.
func TestLibraryKeepsNoStateBetweenCalls(t *testing.T) {
	schema, err := schemaLua()
	require.NoError(t, err)
	common, err := lua.Shared()
	require.NoError(t, err)
	code := schema + common
	for _, op := range scripted() {
		body, err := luaFiles.ReadFile(string(op) + ".lua")
		require.NoError(t, err)
		code += string(body)
	}
	// Definitions (and shadowing locals) are not assignments.
	code = regexp.MustCompile(`(?m)^\s*local [^\n]*`).ReplaceAllString(luaComment.ReplaceAllString(code, ""), "")
	defs, err := scriptDefs(false)
	require.NoError(t, err)
	caches := 0
	for _, d := range defs {
		if perCallState.MatchString(luaComment.ReplaceAllString(d.text, "")) {
			caches++
			continue
		}
		for _, name := range d.names {
			assigned := regexp.MustCompile(`(^|[^.\w])` + name + `(\[[^\]]*\]|\.\w+)* *=[^=]`)
			require.False(t, assigned.MatchString(code), "%s is assigned after its definition: per-call state must start as {} (perCallState)", name)
		}
	}
	require.Positive(t, caches, "presences_seen is a per-call cache")
	lib := libraryOf(mustScripts(t))
	require.Contains(t, lib.source, "presences_seen = {}\n", "each function starts its cache afresh")
	require.True(t, strings.HasPrefix(lib.source, "#!lua name="+lib.name+"\n"))
}

func mustScripts(t *testing.T) map[store.Op]*script {
	t.Helper()
	scripts, err := loadScripts()
	require.NoError(t, err)
	return scripts
}

// Each operation is sent as its EVALSHA was, so valkey-go re-sends the
// same calls by itself after a lost reply: reads (FCALL_RO, as
// EVALSHA_RO), and writes tagged retryable; never a listing, the
// limiter's bucket, nor the charged call of a fetch.
func TestCallsAreSentAsTheirScriptsWere(t *testing.T) {
	client := valkeytest.Start(t).Client(t)
	scripts := mustScripts(t)
	for _, op := range scripted() {
		sc := scripts[op]
		cmd := sc.run.(*fcall).command(client.B(), []string{"k"}, []string{"a"})
		name := cmd.Commands()[0]
		switch {
		case operations[op].listing, operations[op].neverResent:
			require.Equal(t, "FCALL", name, op)
			require.False(t, cmd.IsRetryable(), "%s is never re-sent by valkey-go", op)
		case sc.readOnly:
			require.Equal(t, "FCALL_RO", name, op)
			require.True(t, cmd.IsReadOnly(), "%s is re-sent as a read", op)
		default:
			require.Equal(t, "FCALL", name, op)
			require.True(t, cmd.IsRetryable(), "%s is re-sent as a retryable write", op)
			require.False(t, cmd.IsReadOnly(), op)
		}
		if sc.once != nil {
			once := sc.once.(*fcall).command(client.B(), nil, nil)
			require.False(t, once.IsRetryable(), "%s charged is never re-sent by valkey-go", op)
			require.Equal(t, sc.run.(*fcall).name, sc.once.(*fcall).name)
		}
	}
	require.NotNil(t, scripts[store.OpFetch].once, "a charged fetch has its own call")
}
