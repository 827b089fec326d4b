package proto2

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDeclaredVersionReadsBodyThenQuery(t *testing.T) {
	for _, c := range []struct {
		name  string
		body  string
		query string
		want  Declaration
	}{
		{"body string", `{"protocolVersion":"2"}`, "", Declaration{Kind: Declared, Version: "2"}},
		{"body wins over query", `{"protocolVersion":"0"}`, "protocolVersion=2", Declaration{Kind: Declared, Version: "0"}},
		{"body number", `{"protocolVersion":2}`, "protocolVersion=2", Declaration{Kind: NotAString}},
		{"body null", `{"protocolVersion":null}`, "", Declaration{Kind: NotAString}},
		{"body empty string", `{"protocolVersion":""}`, "", Declaration{Kind: NotAString}},
		{"body without key asks query", `{"max":1}`, "protocolVersion=2", Declaration{Kind: Declared, Version: "2"}},
		{"array has no key", `[{"protocolVersion":"0"}]`, "protocolVersion=2", Declaration{Kind: Declared, Version: "2"}},
		{"not json is no body", `not json`, "protocolVersion=2", Declaration{Kind: Declared, Version: "2"}},
		{"trailing data is no body", `{"protocolVersion":"0"} x`, "", Declaration{Kind: Undeclared}},
		{"empty body, no query", ``, "", Declaration{Kind: Undeclared}},
		{"query empty", ``, "protocolVersion=", Declaration{Kind: NotAString}},
		{"query first value", ``, "protocolVersion=99&protocolVersion=2", Declaration{Kind: Declared, Version: "99"}},
		{"query decoded", ``, "protocol%56ersion=%32", Declaration{Kind: Declared, Version: "2"}},
		{"query not utf-8", ``, "protocolVersion=%FF", Declaration{Kind: Declared, Version: "\uFFFD"}},
		{"query semicolon", ``, "protocolVersion=2;x", Declaration{Kind: Declared, Version: "2;x"}},
		{"duplicate key is unreadable", `{"protocolVersion":"2","protocolVersion":"0"}`, "protocolVersion=2", Declaration{Kind: Unreadable}},
		{"invalid utf-8 is unreadable", "{\"protocolVersion\":\"0\",\"x\":\"\xff\"}", "", Declaration{Kind: Unreadable}},
		{"lone surrogate is unreadable", `{"protocolVersion":"0","x":"\ud800"}`, "", Declaration{Kind: Unreadable}},
	} {
		require.Equal(t, c.want, DeclaredVersion([]byte(c.body), c.query), c.name)
	}
	require.Equal(t, Declaration{Kind: Declared, Version: "2"}, QueryDeclaredVersion("siteId=s&protocolVersion=2"))
	require.Equal(t, Declaration{Kind: Undeclared}, QueryDeclaredVersion("siteId=s"))
}

// The refusal bodies, byte for byte (§2.1.4, §2.4.1, P2-A10).
const (
	bodyNoVersionDual  = "{\"error\":\"unsupported-protocol-version\",\"message\":\"this request declared no protocol version. Upgrade the daemon: `npm i -g byollm@latest`.\",\"supported\":[\"0\",\"2\"],\"minimum\":\"0\"}"
	bodyNoVersionV2    = "{\"error\":\"unsupported-protocol-version\",\"message\":\"this request declared no protocol version. Upgrade the daemon: `npm i -g byollm@latest`.\",\"supported\":[\"2\"],\"minimum\":\"2\"}"
	bodyAsked1Dual     = "{\"error\":\"unsupported-protocol-version\",\"message\":\"this server speaks protocol 0, 2 and the daemon asked for 1. Upgrade the daemon: `npm i -g byollm@latest`.\",\"supported\":[\"0\",\"2\"],\"minimum\":\"0\"}"
	bodyAsked99Dual    = "{\"error\":\"unsupported-protocol-version\",\"message\":\"this server speaks protocol 0, 2 and the daemon asked for 99. This daemon is newer than the server; the server needs upgrading.\",\"supported\":[\"0\",\"2\"],\"minimum\":\"0\"}"
	bodyAsked0V2       = "{\"error\":\"unsupported-protocol-version\",\"message\":\"this server speaks protocol 2 and the daemon asked for 0. Upgrade the daemon: `npm i -g byollm@latest`.\",\"supported\":[\"2\"],\"minimum\":\"2\"}"
	bodyAsked10V2      = "{\"error\":\"unsupported-protocol-version\",\"message\":\"this server speaks protocol 2 and the daemon asked for 10. Upgrade the daemon: `npm i -g byollm@latest`.\",\"supported\":[\"2\"],\"minimum\":\"2\"}"
	bodyAsked99V2      = "{\"error\":\"unsupported-protocol-version\",\"message\":\"this server speaks protocol 2 and the daemon asked for 99. This daemon is newer than the server; the server needs upgrading.\",\"supported\":[\"2\"],\"minimum\":\"2\"}"
	bodyAskedAmpV2Dual = "{\"error\":\"unsupported-protocol-version\",\"message\":\"this server speaks protocol 0, 2 and the daemon asked for <&>. This daemon is newer than the server; the server needs upgrading.\",\"supported\":[\"0\",\"2\"],\"minimum\":\"0\"}"
)

func TestClassifierDaemonPlane(t *testing.T) {
	dual, v2 := Classifier{WithV0: true}, Classifier{}
	for _, c := range []struct {
		name       string
		classifier Classifier
		body       string
		query      string
		codec      Codec
		refusal    string
	}{
		{"2 on dual", dual, `{"protocolVersion":"2"}`, "", CodecV2, ""},
		{"0 on dual", dual, `{"protocolVersion":"0"}`, "", CodecV0, ""},
		{"P2-A1 none on dual", dual, `{"max":1}`, "", 0, bodyNoVersionDual},
		{"number on dual", dual, `{"protocolVersion":0}`, "", 0, bodyNoVersionDual},
		{"empty on dual", dual, `{"protocolVersion":""}`, "", 0, bodyNoVersionDual},
		{"P2-A10 leftover 1 told to upgrade", dual, `{"protocolVersion":"1"}`, "", 0, bodyAsked1Dual},
		{"99 on dual", dual, `{"protocolVersion":"99"}`, "", 0, bodyAsked99Dual},
		{"not escaped as html", dual, `{"protocolVersion":"<&>"}`, "", 0, bodyAskedAmpV2Dual},
		{"query 2 for a post", dual, `{"max":1}`, "protocolVersion=2", CodecV2, ""},
		{"unreadable goes to v0 on dual", dual, `{"protocolVersion":"0","max":1,"max":2}`, "", CodecV0, ""},
		{"unreadable goes to v2 alone", v2, `{"protocolVersion":"2","max":1,"max":2}`, "", CodecV2, ""},
		{"reference: 0", v2, `{"protocolVersion":"0"}`, "", 0, bodyAsked0V2},
		{"reference: 10", v2, `{"protocolVersion":"10"}`, "", 0, bodyAsked10V2},
		{"reference: 99", v2, `{"protocolVersion":"99"}`, "", 0, bodyAsked99V2},
		{"reference: none", v2, ``, "", 0, bodyNoVersionV2},
		{"reference: number 2", v2, `{"protocolVersion":2}`, "", 0, bodyNoVersionV2},
	} {
		codec, refusal := c.classifier.Daemon(DeclaredVersion([]byte(c.body), c.query))
		requireClassified(t, c.name, codec, refusal, c.codec, c.refusal)
	}
}

func TestClassifierSitePlane(t *testing.T) {
	dual, v2 := Classifier{WithV0: true}, Classifier{}
	for _, c := range []struct {
		name       string
		classifier Classifier
		decl       Declaration
		codec      Codec
		refusal    string
	}{
		{"2", dual, DeclaredVersion([]byte(`{"protocolVersion":"2","siteId":"s"}`), ""), CodecV2, ""},
		{"get with query 2", dual, QueryDeclaredVersion("siteId=s&protocolVersion=2"), CodecV2, ""},
		{"v0 site declares nothing", dual, DeclaredVersion([]byte(`{"siteId":"s"}`), ""), CodecV0, ""},
		{"v0 get", dual, QueryDeclaredVersion("siteId=s"), CodecV0, ""},
		{"P2-A2 explicit 0", dual, QueryDeclaredVersion("siteId=s&protocolVersion=0"), CodecV0, ""},
		{"number", dual, DeclaredVersion([]byte(`{"protocolVersion":2}`), ""), 0, bodyNoVersionDual},
		{"empty query", dual, QueryDeclaredVersion("protocolVersion="), 0, bodyNoVersionDual},
		{"99", dual, DeclaredVersion([]byte(`{"protocolVersion":"99"}`), ""), 0, bodyAsked99Dual},
		{"unreadable", dual, DeclaredVersion([]byte(`{"siteId":"a","siteId":"b"}`), ""), CodecV0, ""},
		{"reference: none", v2, QueryDeclaredVersion("siteId=s"), 0, bodyNoVersionV2},
		{"reference: 0", v2, QueryDeclaredVersion("siteId=s&protocolVersion=0"), 0, bodyAsked0V2},
	} {
		codec, refusal := c.classifier.Site(c.decl)
		requireClassified(t, c.name, codec, refusal, c.codec, c.refusal)
	}
}

func requireClassified(t *testing.T, name string, codec Codec, refusal *Refusal, wantCodec Codec, wantBody string) {
	t.Helper()
	if wantBody == "" {
		require.Nil(t, refusal, name)
		require.Equal(t, wantCodec, codec, name)
		return
	}
	require.NotNil(t, refusal, name)
	require.Equal(t, Codec(0), codec, name)
	require.Equal(t, 400, refusal.Status, name)
	body, err := Marshal(refusal.Body)
	require.NoError(t, err)
	require.Equal(t, wantBody, string(body), name)
}

func TestJSLessIsUTF16Order(t *testing.T) {
	require.True(t, jsLess("10", "2"))
	require.True(t, jsLess("1", "2"))
	require.False(t, jsLess("99", "2"))
	require.False(t, jsLess("2", "2"))
	require.False(t, jsLess("20", "2"))
	// U+10000 sorts after U+FF61 in UTF-8 bytes but before it in UTF-16,
	// whose surrogates are below U+E000.
	require.True(t, "\uFF61" < "\U00010000")
	require.True(t, jsLess("\U00010000", "\uFF61"))
	require.Equal(t, "2", CodecV2.String())
	require.Equal(t, "0", CodecV0.String())
	require.Equal(t, "none", Codec(0).String())
}
