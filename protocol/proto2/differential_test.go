package proto2

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/nodetest"

	"github.com/byollm/relayd/protocol/strictjson"
)

// The differential test runs the published zod schemas of @byollm/protocol
// 0.1.1 (pinned in interop/package-lock.json) over a corpus of valid and
// invalid bodies and requires the Go decoders to accept exactly what they
// accept. The corpus is every seed with one change at one place: a member
// dropped, a member added, an array emptied or grown, or a value swapped
// for one from replacements. It holds only text both sides read alike:
// valid UTF-8, no repeated keys, no lone surrogates, within relayd's
// limits (those are relayd's deliberate differences, tested apart).

// replacements are the values swapped in at every place of every seed:
// every JSON type, the integer forms and bounds, the enum words of both
// protocols, and strings at each length bound, counted both in code points
// and in UTF-16 units (zod counts the former).
var replacements = []string{
	`null`, `true`, `false`, `{}`, `[]`, `["x"]`, `[""]`, `[{}]`,
	`0`, `-0`, `-1`, `1`, `2`, `2.0`, `1e1`, `1.5`, `64`, `65`, `499`, `500`, `60000`, `60001`,
	`9007199254740991`, `9007199254740992`, `1e400`,
	`""`, `"x"`, `"0"`, `"2"`, `"private"`, `"team"`, `"self"`, `"public"`, `"llm.chat"`, `"ok"`, `"result"`,
	`"openai-http"`, `"codex-cli"`, `"claude-code"`, `"linux"`, `"start"`, `"poll"`, `"approved"`, `"pending"`,
	`"not-found"`, `"clock-skew"`, `"slot-waiting"`, `"not a url"`, `"mailto:x"`, `"https://relay.example"`,
	`"` + strings.Repeat("a", 3) + `"`, `"` + strings.Repeat("a", 4) + `"`, `"` + strings.Repeat("a", 16) + `"`,
	`"` + strings.Repeat("a", 17) + `"`, `"` + strings.Repeat("a", 19) + `"`, `"` + strings.Repeat("a", 20) + `"`,
	`"` + strings.Repeat("😀", 10) + `"`, `"` + strings.Repeat("😀", 9) + `a"`, `"` + strings.Repeat("😀", 19) + `"`,
	`"` + strings.Repeat("😀", 20) + `"`, `"` + strings.Repeat("😀", 3) + `"`, `"` + strings.Repeat("😀", 4) + `"`,
	`"` + strings.Repeat("😀", 16) + `"`, `"` + strings.Repeat("😀", 17) + `"`, `"` + strings.Repeat("😀", 120) + `"`,
	`"` + strings.Repeat("a", 120) + `"`, `"` + strings.Repeat("a", 121) + `"`, `"` + strings.Repeat("😀", 60) + `a"`,
}

// differentialSchemas are the seeds the oracle has a published schema for.
// The fixture pair answer and the site answers have none.
func differentialSchemas() map[string]string {
	out := map[string]string{}
	for name, body := range validRequests {
		out[name] = body
	}
	for name, body := range validResponses {
		if name != "pair response" && !strings.HasPrefix(name, "site/") {
			out[name] = body
		}
	}
	return out
}

// extraSeeds add shapes one seed per schema cannot reach.
var extraSeeds = []struct{ schema, body string }{
	{"pair/poll response", `{"status":"pending"}`},
	{"pair/poll response", `{"status":"approved","runnerId":"r","owner":"o","ownerLabel":"","sites":{},"controlPlanePublic":"k"}`},
	{"claim response", `{"jobs":[],"leaseMs":60000}`},
	{"heartbeat response", `{"sites":{},"awaitingConsent":[],"cancel":[],"lost":[{"jobId":"j","leaseId":"l"}],"serverTime":1}`},
	{"error", `{"error":"clock-skew","message":"m","serverTime":1,"maxSkewMs":120000}`},
	{"error", `{"error":"daemon-below-floor","message":"m","floor":"0.1.1"}`},
	{"error", `{"error":"rate-limited","message":"m","retryAfter":0}`},
	{"result response", `{"accepted":true,"state":"done"}`},
}

type corpusCase struct {
	Schema string `json:"s"`
	Body   string `json:"b"`
}

func differentialCorpus(t *testing.T) []corpusCase {
	t.Helper()
	var repl []strictjson.Value
	for _, r := range replacements {
		v, err := strictjson.Parse([]byte(r))
		require.NoError(t, err, r)
		repl = append(repl, v)
	}
	seen := map[corpusCase]bool{}
	var out []corpusCase
	add := func(schema string, v strictjson.Value) {
		c := corpusCase{Schema: schema, Body: render(v)}
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	seeds := extraSeeds
	for schema, body := range differentialSchemas() {
		seeds = append(seeds, struct{ schema, body string }{schema, body})
	}
	for _, s := range seeds {
		root, err := strictjson.Parse([]byte(s.body))
		require.NoError(t, err, s.body)
		add(s.schema, root)
		variants(root, repl, func(v strictjson.Value) { add(s.schema, v) })
	}
	return out
}

// variants calls emit with every tree that differs from v by one change at
// one place.
func variants(v strictjson.Value, repl []strictjson.Value, emit func(strictjson.Value)) {
	for _, r := range repl {
		emit(r)
	}
	switch v.Kind {
	case strictjson.Object:
		for i := range v.Members {
			emit(strictjson.Value{Kind: strictjson.Object, Members: slices.Delete(slices.Clone(v.Members), i, i+1)})
			variants(v.Members[i].Value, repl, func(child strictjson.Value) {
				members := slices.Clone(v.Members)
				members[i].Value = child
				emit(strictjson.Value{Kind: strictjson.Object, Members: members})
			})
		}
		extra := strictjson.Member{Key: "extra", Value: strictjson.Value{Kind: strictjson.Number, Text: "1"}}
		emit(strictjson.Value{Kind: strictjson.Object, Members: append(slices.Clone(v.Members), extra)})
	case strictjson.Array:
		emit(strictjson.Value{Kind: strictjson.Array, Items: []strictjson.Value{}})
		if len(v.Items) > 0 {
			emit(strictjson.Value{Kind: strictjson.Array, Items: append(slices.Clone(v.Items), v.Items[0])})
			emit(strictjson.Value{Kind: strictjson.Array, Items: v.Items[:1]})
		}
		for i := range v.Items {
			variants(v.Items[i], repl, func(child strictjson.Value) {
				items := slices.Clone(v.Items)
				items[i] = child
				emit(strictjson.Value{Kind: strictjson.Array, Items: items})
			})
		}
	}
}

// render writes a tree back as JSON text, numbers as their literals.
func render(v strictjson.Value) string {
	var b strings.Builder
	var walk func(strictjson.Value)
	walk = func(v strictjson.Value) {
		switch v.Kind {
		case strictjson.Null:
			b.WriteString("null")
		case strictjson.Bool:
			b.WriteString(map[bool]string{true: "true", false: "false"}[v.Bool])
		case strictjson.Number:
			b.WriteString(v.Text)
		case strictjson.String:
			s, _ := Marshal(v.Text)
			b.Write(s)
		case strictjson.Array:
			b.WriteByte('[')
			for i, item := range v.Items {
				if i > 0 {
					b.WriteByte(',')
				}
				walk(item)
			}
			b.WriteByte(']')
		case strictjson.Object:
			b.WriteByte('{')
			for i, m := range v.Members {
				if i > 0 {
					b.WriteByte(',')
				}
				k, _ := Marshal(m.Key)
				b.Write(k)
				b.WriteByte(':')
				walk(m.Value)
			}
			b.WriteByte('}')
		}
	}
	walk(v)
	return b.String()
}

func TestDifferentialAgainstPublishedZod(t *testing.T) {
	interop := nodetest.Interop(t, "@byollm/protocol")
	corpus := differentialCorpus(t)
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, c := range corpus {
		require.NoError(t, enc.Encode(c))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "testdata/zodcheck.mjs", interop)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node: %s", stderr.String())
	verdicts := strings.Fields(string(out))
	require.Len(t, verdicts, len(corpus))

	decoders := requestDecoders(Decoder{})
	for name, d := range responseDecoders {
		decoders[name] = d
	}
	mismatches, accepted := 0, 0
	for i, c := range corpus {
		require.NotEqual(t, "?", verdicts[i], "the oracle knows no schema %q", c.Schema)
		_, goErr := decoders[c.Schema]([]byte(c.Body))
		zodAccepts := verdicts[i] == "1"
		if zodAccepts {
			accepted++
		}
		if zodAccepts != (goErr == nil) {
			mismatches++
			if mismatches <= 20 {
				t.Errorf("%s: zod accepts=%v, Go: %v\n  %s", c.Schema, zodAccepts, goErr, c.Body)
			}
		}
	}
	t.Logf("%d bodies, %d accepted by zod, %d mismatches", len(corpus), accepted, mismatches)
	require.Greater(t, accepted, len(corpus)/20, "the corpus must hold many valid bodies too")
}
