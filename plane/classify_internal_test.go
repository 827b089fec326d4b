package plane

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// withoutMember drops the named top-level members and keeps every other
// byte of the others, so protocol "0"'s strict schema reads the body as
// sent but for the key (A2).
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
