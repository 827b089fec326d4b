package plane

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// withoutMember drops the named top-level members and keeps every other
// byte of the others, so protocol "0"'s strict schema reads the body as
// sent but for the key (P2-A2).
func TestWithoutMember(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"protocolVersion":"0","siteId":"s"}`, `{"siteId":"s"}`},
		{`{"siteId":"s", "protocolVersion":"0"}`, `{"siteId":"s"}`},
		{` { "a" : 1 ,` + "\n" + ` "protocolVersion" : "0" , "b":{"protocolVersion":"kept"} } `, `{"a" : 1,"b":{"protocolVersion":"kept"}}`},
		{`{"protocolVersion":"0"}`, `{}`},
		{`{"a":"\u00e9","protocolVersion":"0","a":2}`, `{"a":"\u00e9","a":2}`},
	} {
		got, ok := withoutMember([]byte(tc.in), "protocolVersion")
		require.True(t, ok, tc.in)
		require.Equal(t, tc.want, string(got), tc.in)
	}
	for _, bad := range []string{``, `[]`, `{"a":1`, `{"a":1} {}`, `"protocolVersion"`, `{1:2}`} {
		_, ok := withoutMember([]byte(bad), "protocolVersion")
		require.False(t, ok, bad)
	}
}

// The classifier reads the declaration from the body's one parse where it
// can; it must pick exactly what proto2's own reading picks.
func TestClassifierAgreesWithProto2sReading(t *testing.T) {
	env := &codec.Env{}
	for _, served := range []Protocols{{V0: true, V2: true}, {V2: true}} {
		k := newClassifier(env, Config{Protocols: served})
		bodies := []string{``, `{}`, `[]`, `null`, `not json`, `{"protocolVersion":"0"}`, `{"protocolVersion":"2"}`, `{"protocolVersion":"99"}`,
			`{"protocolVersion":""}`, `{"protocolVersion":2}`, `{"protocolVersion":null}`, `{"a":1,"a":2}`, "{\"protocolVersion\":\"\xff\"}",
			`{"protocolVersion":"2"} x`, `{"x":{"protocolVersion":"2"}}`}
		queries := []string{"", "protocolVersion=2", "protocolVersion=0", "siteId=s&protocolVersion=", "protocolVersion=7"}
		for _, plane := range []codec.Plane{codec.Daemon, codec.Site} {
			for _, raw := range bodies {
				for _, query := range queries {
					body := protocol.NewDecoder(protocol.Limits{}).Body([]byte(raw))
					got, _, gotErr := k.classify(plane, body, query)
					rule := k.rules.Daemon
					if plane == codec.Site {
						rule = k.rules.Site
					}
					which, refusal := rule(k.decoder.DeclaredVersion([]byte(raw), query))
					if refusal != nil {
						require.Equal(t, refusal, gotErr, "%v %q %q", plane, raw, query)
						continue
					}
					want := k.v2
					if which == proto2.CodecV0 {
						want = k.v0
					}
					require.NoError(t, gotErr, "%v %q %q", plane, raw, query)
					require.True(t, want == got, "%v %q %q: codec %v", plane, raw, query, which)
				}
			}
		}
	}
}
