package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A dump in callgrind's compressed format: names given once with their
// id, relative positions, and a call's cost on the line after calls=.
const sampleDump = `# callgrind format
version: 1
events: Ir
summary: 1000

fl=(1) server.c
fn=(1) luaCallFunction
10 50
cfn=(2) luaCreateArray
calls=2 20
+1 100
cfn=(3) luaRedisGenericCommand
calls=1 30
* 600

fn=(2)
20 100

fn=(3)
30 200
cfn=(4) scriptCall
calls=1 40
+2 400

fn=(4)
40 400

fn=(5) processTimeEvents
50 150
fn=(6) luaF_findupval
60 0
totals: 1000
`

func TestReadCallgrindSplitsOwnAndCalledCost(t *testing.T) {
	p, err := readCallgrind(strings.NewReader(sampleDump))
	require.NoError(t, err)
	require.Equal(t, int64(50), p.self["luaCallFunction"])
	require.Equal(t, int64(100), p.self["luaCreateArray"], "a later fn=(2) names the same function")
	require.Equal(t, int64(750), p.inclusive("luaCallFunction"), "its own 50, and its calls' 100 and 600")
	require.Equal(t, int64(600), p.inclusive("luaRedisGenericCommand"))
	require.Equal(t, int64(900), p.total(), "own costs only: calls are not counted twice")

	parts := serverParts(p)
	require.Equal(t, int64(750), parts["script"])
	require.Equal(t, int64(100), parts["keysArgs"])
	require.Equal(t, int64(600), parts["redisCall"])
	require.Equal(t, int64(400), parts["commands"])
	require.Equal(t, int64(50), parts["lua"], "the script less its tables and its redis.calls")
	require.Equal(t, int64(150), parts["cron"])
	require.Equal(t, int64(0), parts["other"])
}

func TestReadCallgrindRefusesAMalformedCostLine(t *testing.T) {
	_, err := readCallgrind(strings.NewReader("fn=(1) f\n10 20 30\n"))
	require.Error(t, err)
}
