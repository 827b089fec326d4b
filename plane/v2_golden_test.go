package plane_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
)

// traced is one exchange of the golden trace.
type traced struct {
	method, target, request string
	status                  int
	response                string
}

var (
	traceLine = regexp.MustCompile(`^\[relay\] (GET|POST) (\S+) (.*) -> (\d{3}) (.*)$`)
	// epochMs matches the times of a body: they differ run to run.
	epochMs = regexp.MustCompile(`\b1\d{12}\b`)
)

// readGoldenTrace reads the exchanges the real daemon 0.1.1 and site SDK
// 0.1.1 had with the reference relay 0.1.1 (spec §8.5), as protocol/proto2
// keeps them.
func readGoldenTrace(t *testing.T) []traced {
	t.Helper()
	f, err := os.Open("../protocol/proto2/testdata/protocol-2-trace.log")
	require.NoError(t, err)
	defer f.Close()
	var out []traced
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := traceLine.FindStringSubmatch(sc.Text()); m != nil {
			status := map[string]int{"200": 200, "409": 409}[m[4]]
			require.NotZero(t, status, "a status the trace holds: %s", m[4])
			out = append(out, traced{method: m[1], target: m[2], request: strings.TrimSpace(m[3]), status: status, response: m[5]})
		}
	}
	require.NoError(t, sc.Err())
	require.Len(t, out, 19)
	return out
}

// traceNames finds what the trace calls the site, its key, the device, the
// runner, the job's deadline and the lease, so each can be swapped for this
// world's own.
func traceNames(t *testing.T, trace []traced) map[string]string {
	t.Helper()
	names := map[string]string{}
	var first struct {
		Sites map[string]json.RawMessage `json:"sites"`
	}
	require.NoError(t, json.Unmarshal([]byte(trace[0].response), &first))
	for keyID, identity := range first.Sites {
		names["siteKeyID"], names["siteIdentity"] = keyID, string(identity)
	}
	for _, x := range trace {
		var req struct {
			RunnerID string `json:"runnerId"`
			SiteID   string `json:"siteId"`
			Stub     *struct {
				DeadlineAt json.Number `json:"deadlineAt"`
			} `json:"stub"`
		}
		_ = json.Unmarshal([]byte(x.request), &req)
		if req.RunnerID != "" {
			names["runner"] = req.RunnerID
		}
		if req.SiteID != "" {
			names["siteID"] = req.SiteID
		}
		if req.Stub != nil {
			names["deadline"] = req.Stub.DeadlineAt.String()
		}
		var resp struct {
			Jobs []struct {
				Device json.RawMessage `json:"device"`
				Lease  *struct {
					ID string `json:"id"`
				} `json:"lease"`
			} `json:"jobs"`
		}
		_ = json.Unmarshal([]byte(x.response), &resp)
		for _, j := range resp.Jobs {
			if j.Lease != nil {
				names["lease"] = j.Lease.ID
			}
			if j.Device != nil && strings.Contains(x.target, "pending") {
				names["deviceIdentity"] = string(j.Device)
				var d protocol.PublicIdentity
				require.NoError(t, json.Unmarshal(j.Device, &d))
				names["deviceKeyID"], _ = protocol.KeyIDOf(d.Identity)
			}
		}
	}
	for _, k := range []string{"siteKeyID", "siteIdentity", "runner", "siteID", "deadline", "lease", "deviceIdentity", "deviceKeyID"} {
		require.NotEmpty(t, names[k], "the trace names its %s", k)
	}
	return names
}

// The golden trace, replayed against relayd: the same requests in the same
// order, with this world's site, device, keys, deadline and lease in place
// of the recorded ones and signed by this world's keys, get the same
// statuses and byte for byte the same answers but for the times.
func TestV2_GoldenTraceReplays(t *testing.T) {
	trace := readGoldenTrace(t)
	theirs := traceNames(t, trace)
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		d := b.daemonAt(t, "alice", b.url, "runner_alice")
		ours := map[string]string{
			"siteKeyID": b.keys["site"].KeyID(), "siteIdentity": string(mustJSON(t, b.keys["site"].Public())),
			"runner": "runner_alice", "siteID": siteMain, "deadline": itoa(b.storeNow(t) + jobTTL.Milliseconds()),
			"deviceIdentity": string(mustJSON(t, b.keys["alice"].Public())), "deviceKeyID": b.keys["alice"].KeyID(),
		}
		swap := func(s string) string {
			for k, v := range theirs {
				if ours[k] != "" {
					s = strings.ReplaceAll(s, v, ours[k])
				}
			}
			return s
		}
		for i, x := range trace {
			target, body := swap(x.target), []byte(swap(x.request))
			req := peer.RawRequest{Method: x.method, Path: target, Body: body}
			endpoint := target[strings.LastIndexByte(target, '/')+1:]
			endpoint, _, _ = strings.Cut(endpoint, "?")
			if strings.HasPrefix(target, peer.SitePathPrefix) {
				if x.method == http.MethodGet {
					body = nil
					req.Body = nil
				}
				req.Header = b.site.SignHeaders("site/"+endpoint, body)
			} else {
				req.Header = d.SignHeaders(endpoint, body)
			}
			resp := b.raw(t, req)
			require.Equal(t, x.status, resp.Status, "exchange %d, %s %s: %s", i, x.method, x.target, resp.Body)
			if ours["lease"] == "" {
				var claimed struct {
					Jobs []struct {
						Lease struct {
							ID string `json:"id"`
						} `json:"lease"`
					} `json:"jobs"`
				}
				if json.Unmarshal(resp.Body, &claimed) == nil && len(claimed.Jobs) == 1 {
					ours["lease"] = claimed.Jobs[0].Lease.ID
				}
			}
			want := epochMs.ReplaceAllString(swap(x.response), "<time>")
			require.Equal(t, want, epochMs.ReplaceAllString(string(resp.Body), "<time>"), "exchange %d, %s %s", i, x.method, x.target)
		}
		require.NotEmpty(t, ours["lease"], "the replay claimed the job")
	})
}
