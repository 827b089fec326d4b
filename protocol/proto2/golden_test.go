package proto2

import (
	"bufio"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exchange is one request and answer of the recorded trace.
type exchange struct {
	method, target, request string
	status                  string
	response                string
}

var traceLine = regexp.MustCompile(`^\[relay\] (GET|POST) (\S+) (.*) -> (\d{3}) (.*)$`)

// readTrace reads testdata/protocol-2-trace.log, a copy of
// shared/spec/protocol-2-trace.log: the real daemon 0.1.1 and site SDK
// 0.1.1 against the reference relay 0.1.1 (§8.5).
func readTrace(t *testing.T) []exchange {
	t.Helper()
	f, err := os.Open("testdata/protocol-2-trace.log")
	require.NoError(t, err)
	defer f.Close()
	var out []exchange
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := traceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		out = append(out, exchange{method: m[1], target: m[2], request: strings.TrimSpace(m[3]), status: m[4], response: m[5]})
	}
	require.NoError(t, sc.Err())
	require.Len(t, out, 19, "every exchange of the trace")
	return out
}

// roundTrip decodes body with decode and requires that encoding the result
// gives the very same bytes.
func roundTrip(t *testing.T, what, body string, decode schemaDecoder) {
	t.Helper()
	v, err := decode([]byte(body))
	require.NoError(t, err, what)
	again, err := Marshal(v)
	require.NoError(t, err, what)
	require.Equal(t, body, string(again), what)
}

// TestGoldenTrace: every request of the trace is classified as "2" and
// decodes, and every answer decodes strictly and re-encodes byte for byte.
func TestGoldenTrace(t *testing.T) {
	requests := requestDecoders(Decoder{})
	for _, x := range readTrace(t) {
		u, err := url.Parse(x.target)
		require.NoError(t, err)
		endpoint := path.Base(u.Path)
		what := x.method + " " + x.target
		site := strings.HasPrefix(u.Path, "/relay/site/")
		var body []byte
		if x.method == "POST" {
			body = []byte(x.request)
		}
		decl := DeclaredVersion(body, u.RawQuery)
		classify := Classifier{WithV0: true}.Daemon
		if site {
			classify = Classifier{WithV0: true}.Site
		}
		codec, refusal := classify(decl)
		require.Nil(t, refusal, what)
		require.Equal(t, CodecV2, codec, what)

		schema := endpoint
		if site {
			schema = "site/" + endpoint
		}
		if x.method == "POST" {
			roundTrip(t, what+" request", x.request, requests[schema])
		} else {
			q, err := DecodeSiteQuery(u.RawQuery)
			require.NoError(t, err, what)
			require.Equal(t, "site_demo", q.SiteID)
		}
		if x.status != "200" {
			roundTrip(t, what+" answer", x.response, erase(DecodeWireError))
			continue
		}
		roundTrip(t, what+" answer", x.response, responseDecoders[schema+" response"])
	}
}

// TestGoldenRefusalsOfTheTrace: the refusals the reference sent are the
// catalogue's, byte for byte.
func TestGoldenRefusalsOfTheTrace(t *testing.T) {
	seen := 0
	for _, x := range readTrace(t) {
		if x.status == "200" {
			continue
		}
		seen++
		require.Equal(t, "409", x.status)
		body, err := Marshal(NotSealed().Body)
		require.NoError(t, err)
		require.Equal(t, x.response, string(body))
	}
	require.Equal(t, 2, seen)
}

// Every seed body and answer re-encodes to itself, so the Go types carry
// every field in the reference's order.
func TestSeedsRoundTrip(t *testing.T) {
	requests := requestDecoders(Decoder{})
	for name, body := range validRequests {
		v, err := requests[name]([]byte(body))
		require.NoError(t, err)
		pair, isPair := v.(PairRequest)
		if isPair {
			v = pairMember(pair)
		}
		again, err := Marshal(v)
		require.NoError(t, err)
		require.Equal(t, body, string(again), name)
	}
	for name, body := range validResponses {
		roundTrip(t, name, body, responseDecoders[name])
	}
}

func pairMember(p PairRequest) any {
	switch {
	case p.Start != nil:
		return p.Start
	case p.Poll != nil:
		return p.Poll
	}
	return p.Fixture
}
