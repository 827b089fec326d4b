package valkey

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/store"
)

// The scripts run as one Valkey Functions library per build: the schema
// and the shared helpers are defined once, when the library is loaded
// (FUNCTION LOAD), and each operation is a function registered in it, so
// a call runs its operation and its bindings, not the definitions of
// every helper it uses. An operation's function binds at entry what its
// script's header binds (K, and ADMIT or the memo's REQ_ID where the
// operation has them), into locals the helpers share at the library's
// top level.
//
// The library is named after a digest of its text, and so is each of its
// functions: replicas of two builds, in a rolling upgrade, load their
// libraries side by side and each calls its own. A store loads its
// library on every node at open (LoadScripts) and again when a call
// finds its function missing (a restart without persistence, FUNCTION
// FLUSH), then sends the call again: what NOSCRIPT and EVAL were to the
// scripts.

// executor runs one operation's function with its keys and arguments.
type executor interface {
	Exec(ctx context.Context, c valkey.Client, keys, args []string) valkey.ValkeyResult
}

// callKind is how a call is sent, which decides whether valkey-go sends
// it again by itself after a lost reply: the same rules as the
// valkey.NewLuaScript constructors' EVALSHA (plain, read-only, retryable).
type callKind int

const (
	// callPlain is FCALL untagged, which valkey-go never re-sends.
	callPlain callKind = iota
	// callReadOnly is FCALL_RO, which valkey-go re-sends as it does
	// EVALSHA_RO (both carry its read-only script tag).
	callReadOnly
	// callRetryable is FCALL tagged retryable, as EVALSHA of
	// NewLuaScriptRetryable is.
	callRetryable
)

// fcall is an executor calling one function of a library.
type fcall struct {
	lib  *library
	op   store.Op
	kind callKind
	// name is the function's name in lib, set when lib is built.
	name string
}

// Exec sends the call; when the server answers that the function does
// not exist, it loads the library on every node and sends the call again.
func (f *fcall) Exec(ctx context.Context, c valkey.Client, keys, args []string) valkey.ValkeyResult {
	seen := f.lib.loads.Load()
	resp := c.Do(ctx, f.command(c.B(), keys, args))
	if !isMissingFunction(resp.Error()) {
		return resp
	}
	if err := f.lib.reload(ctx, c, seen); err != nil {
		return valkey.NewErrorResult(err)
	}
	return c.Do(ctx, f.command(c.B(), keys, args))
}

// ExecMulti loads the library and pipelines the calls (benchmarks only).
func (f *fcall) ExecMulti(ctx context.Context, c valkey.Client, multi ...valkey.LuaExec) []valkey.ValkeyResult {
	if err := f.lib.reload(ctx, c, f.lib.loads.Load()); err != nil {
		out := make([]valkey.ValkeyResult, len(multi))
		for i := range out {
			out[i] = valkey.NewErrorResult(err)
		}
		return out
	}
	cmds := make(valkey.Commands, 0, len(multi))
	for _, m := range multi {
		cmds = append(cmds, f.command(c.B(), m.Keys, m.Args))
	}
	return c.DoMulti(ctx, cmds...)
}

// command builds the call with b, the builder of the client (or the
// dedicated connection, replication.go) that sends it.
func (f *fcall) command(b valkey.Builder, keys, args []string) valkey.Completed {
	n := int64(len(keys))
	if f.kind == callReadOnly {
		return b.FcallRo().Function(f.name).Numkeys(n).Key(keys...).Arg(args...).Build()
	}
	cmd := b.Fcall().Function(f.name).Numkeys(n).Key(keys...).Arg(args...).Build()
	if f.kind == callRetryable {
		cmd = cmd.ToRetryable()
	}
	return cmd
}

// isMissingFunction says whether err is the server's answer to a call of
// a function it does not have (Valkey 8 and Redis 7 alike).
func isMissingFunction(err error) bool {
	verr, ok := valkey.IsValkeyErr(err)
	// valkey-go drops the ERR prefix of the server's message.
	return ok && strings.HasPrefix(strings.TrimPrefix(verr.Error(), "ERR "), "Function not found")
}

// library is one build of the scripts as a Functions library.
type library struct {
	name   string
	source string
	// loads counts the loads this store made, so that calls which found
	// the function missing at once load it once between them.
	loads atomic.Uint64
	mu    sync.Mutex
}

// libraryPrefix starts the name of every relayd library (FUNCTION LIST
// LIBRARYNAME relayd_ finds them all).
const libraryPrefix = "relayd_"

// hashMark stands for the library's digest in its text until it is known.
const hashMark = "@HASH@"

// reload loads the library unless this store loaded it since seen.
func (l *library) reload(ctx context.Context, c valkey.Client, seen uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loads.Load() != seen {
		return nil
	}
	if err := l.load(ctx, c); err != nil {
		return err
	}
	l.loads.Add(1)
	return nil
}

// load sends FUNCTION LOAD REPLACE to every node. A replica refuses it
// (READONLY) and gets the library from its primary instead. A library of
// the same name is the same text, so REPLACE changes nothing a caller of
// another replica could see.
func (l *library) load(ctx context.Context, c valkey.Client) error {
	for addr, node := range c.Nodes() {
		got, err := node.Do(ctx, node.B().FunctionLoad().Replace().FunctionCode(l.source).Build()).ToString()
		if verr, ok := valkey.IsValkeyErr(err); ok && strings.HasPrefix(verr.Error(), "READONLY") {
			continue
		}
		if err != nil {
			return fmt.Errorf("valkey store: loading library %s on %s: %w", l.name, addr, err)
		}
		if got != l.name {
			return fmt.Errorf("valkey store: library %s loaded on %s as %s", l.name, addr, got)
		}
	}
	return nil
}

// topLevelBinding finds the names a script's header binds.
var topLevelBinding = regexp.MustCompile(`(?m)^local ([A-Za-z_][A-Za-z0-9_]*)`)

// perCallState matches a top-level definition that is an empty table: a
// cache of one call (presences_seen), which every function starts afresh.
var perCallState = regexp.MustCompile(`(?m)^local ([A-Za-z_][A-Za-z0-9_]*) = \{\}\s*$`)

// buildLibrary builds the library of scripts (each made by loadScript from
// defs) and points each one's executors at it.
func buildLibrary(defs []helper, scripts map[store.Op]*script) *library {
	ops := make([]store.Op, 0, len(scripts))
	for op := range scripts {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	var all strings.Builder
	bound := []string{"KEYS", "ARGV"}
	for _, op := range ops {
		all.WriteString(scripts[op].code)
		for _, m := range topLevelBinding.FindAllStringSubmatch(scripts[op].bindings, -1) {
			if !slices.Contains(bound, m[1]) {
				bound = append(bound, m[1])
			}
		}
	}
	var fresh []string
	var b strings.Builder
	b.WriteString("-- relayd's scripts, one build (store/valkey/functions.go)\n")
	b.WriteString("local " + strings.Join(bound, ", ") + "\n")
	for _, d := range helpersFor(defs, all.String()) {
		b.WriteString(d.text)
		if m := perCallState.FindStringSubmatch(d.bare); m != nil {
			fresh = append(fresh, m[1])
		}
	}
	entry := strings.Join(bound, ", ") + " = keys, args\n"
	for _, name := range fresh {
		entry += name + " = {}\n"
	}
	for _, op := range ops {
		writeFunction(&b, op, scripts[op], entry)
	}
	sum := sha256.Sum256([]byte(b.String()))
	hash := hex.EncodeToString(sum[:6])
	lib := &library{name: libraryPrefix + hash}
	lib.source = "#!lua name=" + lib.name + "\n" + strings.ReplaceAll(b.String(), hashMark, hash)
	for _, op := range ops {
		for _, e := range []executor{scripts[op].run, scripts[op].once} {
			if f, ok := e.(*fcall); ok {
				f.lib, f.name = lib, functionName(op, hash)
			}
		}
	}
	return lib
}

// functionName is op's function in the library of digest hash: no two
// operations' names are prefixes of each other, nor are two builds'.
func functionName(op store.Op, hash string) string {
	return libraryPrefix + string(op) + "_" + hash
}

// writeFunction registers op's function: entry resets the shared
// bindings, then the script's header binds them without declaring them.
func writeFunction(b *strings.Builder, op store.Op, sc *script, entry string) {
	b.WriteString("\n-- operation: " + string(op) + "\n")
	b.WriteString("redis.register_function{function_name = '" + functionName(op, hashMark) + "',")
	if sc.readOnly {
		b.WriteString(" flags = { 'no-writes' },")
	}
	b.WriteString(" callback = function(keys, args)\n")
	b.WriteString(entry)
	b.WriteString(topLevelBinding.ReplaceAllString(sc.bindings, "$1"))
	b.WriteString(sc.code)
	b.WriteString("\nend}\n")
}

// newFcall is the executor of one kind for op, given its library when the
// library is built.
func newFcall(op store.Op, kind callKind) *fcall {
	return &fcall{op: op, kind: kind}
}

// function is the name sc's calls send (FCALL <name>), as SLOWLOG and the
// wire show it.
func (sc *script) function() string { return sc.run.(*fcall).name }
