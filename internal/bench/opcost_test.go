package bench

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
)

// TestOpCostsMeasureEachOperationAlone drives three calls of every
// operation against a real server. Each batch must count exactly its own
// script call per call (a batch that leaked another step's calls, or lost
// its own, shows up as a fraction), and the commands the lifecycle needs
// inside the scripts must be there.
func TestOpCostsMeasureEachOperationAlone(t *testing.T) {
	srv := valkeytest.Start(t)
	costs, err := MeasureOpCosts(t.Context(), OpCostOptions{Addr: srv.Addrs[0], Calls: 3})
	require.NoError(t, err)
	var ops []string
	for _, c := range costs {
		ops = append(ops, c.Op)
		require.Equal(t, 3, c.Calls)
		// The trivial script is EVALSHA; the store's operations are FCALL.
		scripts := c.Commands["evalsha"] + c.Commands["evalsha_ro"] + c.Commands["fcall"] + c.Commands["fcall_ro"]
		require.InDelta(t, 1, scripts, 0.34, "%s: %v", c.Op, c.Commands)
		require.Positive(t, c.MicrosPerCall, c.Op)
		require.Zero(t, c.InstructionsPerCall, "no callgrind, no instructions")
	}
	require.Equal(t, []string{"trivial", "enqueue", "presence", "claim", "payload", "fetch", "touch", "heartbeat",
		"result", "sweep", "pending", "results"}, ops)
	byOp := map[string]OpCost{}
	for _, c := range costs {
		byOp[c.Op] = c
	}
	require.Positive(t, byOp["claim"].Commands["zrangebyscore"], "a claim looks at its queues")
	require.Positive(t, byOp["result"].Commands["hset"], "a result writes its record")

	only, err := MeasureOpCosts(t.Context(), OpCostOptions{Addr: srv.Addrs[0], Calls: 2, Only: []string{"fetch"}})
	require.NoError(t, err)
	require.Len(t, only, 1, "the earlier steps run but are not reported")
	require.Equal(t, "fetch", only[0].Op)

	rounds, err := MeasureOpCosts(t.Context(), OpCostOptions{Addr: srv.Addrs[0], Calls: 5, Round: 2, Only: []string{"claim", "result"}})
	require.NoError(t, err)
	require.Len(t, rounds, 2)
	for _, c := range rounds {
		require.Equal(t, 5, c.Calls, "rounds of 2, 2 and 1 add up")
		// A claim now and then runs one more script (a once-a-second
		// mend), never fewer than its own.
		require.GreaterOrEqual(t, c.Commands["fcall"], 1.0, "%s: %v", c.Op, c.Commands)
		require.Less(t, c.Commands["fcall"], 1.5, "%s: %v", c.Op, c.Commands)
	}

	_, err = MeasureOpCosts(t.Context(), OpCostOptions{Addr: srv.Addrs[0]})
	require.Error(t, err)
}

func TestParseCommandStatsAndPerCall(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=10,usec=400,usec_per_call=40.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hget:calls=30,usec=60,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=9,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n"
	stats := parseCommandStats(info)
	require.Equal(t, commandStat{calls: 10, usec: 400}, stats["evalsha"])
	require.Equal(t, commandStat{calls: 1, usec: 9}, stats["config|resetstat"])
	per, usec := perCall(stats, 10)
	require.Equal(t, map[string]float64{"evalsha": 1, "hget": 3}, per, "the measurement's own commands are left out")
	require.InDelta(t, 40, usec, 1e-9, "a script's time already holds its inner calls")

	per, usec = perCall(parseCommandStats("cmdstat_hget:calls=4,usec=8,usec_per_call=2.00\n"), 4)
	require.Equal(t, map[string]float64{"hget": 1}, per)
	require.InDelta(t, 2, usec, 1e-9, "without a script, every command's time counts")
}

func TestNewestDumpReadsTheHighestNumberedDump(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "cg.out")
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
	}
	write("cg.out.2", "version: 1\ncmd: x\nsummary: 200\ntotals: 222 7\n")
	write("cg.out.10", "version: 1\ntotals: 1010\n")
	write("cg.out.9", "version: 1\ntotals: 909\n")
	dump, total, err := (&Callgrind{OutFile: out}).newestDump()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "cg.out.10"), dump, "10 sorts after 9 by number, not by name")
	require.Equal(t, int64(1010), total)

	total, err = callgrindTotal(bufio.NewScanner(strings.NewReader("summary: 55\n")))
	require.NoError(t, err)
	require.Equal(t, int64(55), total)
	_, err = callgrindTotal(bufio.NewScanner(strings.NewReader("events: Ir\n")))
	require.Error(t, err)
	_, _, err = (&Callgrind{OutFile: filepath.Join(dir, "none")}).newestDump()
	require.Error(t, err)
}

// A served script's definitions are what comes before its operation; a
// remembering one also gets the memo variant. Both run on a real server.
func TestScriptHeadersCutWhereTheOperationBegins(t *testing.T) {
	source := "-- relayd script: x\nlocal K = {\n  a = KEYS[1],\n  b = KEYS[3],\n}\nlocal REQ_ID = table.remove(ARGV, 1)\n" +
		"local function answer_once(run)\n  return run()\nend\nlocal function helper() return redis.call('GET', K.a) end\n" +
		"\n-- operation: x\nreturn helper()\n"
	variants, keys, err := scriptVariants(source)
	require.NoError(t, err)
	require.Equal(t, 3, keys, "the highest key index, not the count of mentions")
	require.NotContains(t, variants["definitions"], "return helper()")
	require.True(t, strings.HasSuffix(variants["definitions"], "end\n\nreturn 1\n"), variants["definitions"])
	require.Contains(t, variants["memo"], "return answer_once(")
	_, _, err = scriptVariants("return 1")
	require.Error(t, err)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.lua"), []byte(source), 0o600))
	srv := valkeytest.Start(t)
	costs, err := MeasureScriptHeaders(t.Context(), srv.Addrs[0], dir, 2, nil)
	require.NoError(t, err)
	require.Equal(t, []ScriptCost{{Script: "x", Variant: "definitions", Keys: 3, Calls: 2}, {Script: "x", Variant: "memo", Keys: 3, Calls: 2}}, costs)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.lua"), []byte("local K = {}\n-- operation: x\n"+"error('no')\n"), 0o600))
	_, err = MeasureScriptHeaders(t.Context(), srv.Addrs[0], dir, 1, nil)
	require.NoError(t, err, "only the part before the operation runs")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.lua"), []byte("error('no')\n-- operation: x\n"), 0o600))
	_, err = MeasureScriptHeaders(t.Context(), srv.Addrs[0], dir, 1, nil)
	require.Error(t, err, "a failing script fails the run")
}
