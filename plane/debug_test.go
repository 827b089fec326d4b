package plane_test

// The debug page (relay-behaviour.md section E), where relayd serves it, and
// the admin listener's health and readiness.

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// debugPage fetches the page at base+path and checks the envelope of it.
func debugPage(t *testing.T, b *bundle, base, path, method string) string {
	t.Helper()
	resp := b.raw(t, peer.RawRequest{BaseURL: base, Method: method, Path: path})
	require.Equal(t, 200, resp.Status, "%s", resp.Body)
	require.Equal(t, []string{"text/html; charset=utf-8"}, resp.Header.Values("Content-Type"))
	return string(resp.Body)
}

func TestDebugPage_IsNotOnThePublicListenerByDefault(t *testing.T) { // RB-E6, design §7
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		for _, path := range []string{"/debug", "/byollm/debug"} {
			for _, m := range []string{http.MethodGet, http.MethodPost} {
				requireAnswer(t, b.raw(t, peer.RawRequest{Method: m, Path: path}), 404, bodyNotFoundPath)
			}
		}
	})
}

func TestDebugPage_IsOnThePublicListenerWithPublicDebugAndAlwaysOnAdmin(t *testing.T) { // RB-E1, RB-A1 step 1
	eachStore(t, &setupOpts{PublicDebug: true, BasePath: "/base/"}, func(t *testing.T, b *bundle) {
		for _, base := range []string{b.url, b.adminURL} {
			for _, path := range []string{"/debug", "/base/debug"} {
				for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
					require.Contains(t, debugPage(t, b, base, path, m), "<title>byollm relay — debug</title>")
				}
			}
		}
		// Only the exact paths: the old base path is not one of them.
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/byollm/debug"}), 404, bodyNotFoundPath)
	})
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		for _, path := range []string{"/debug", "/byollm/debug"} {
			require.Contains(t, debugPage(t, b, b.adminURL, path, http.MethodGet), "<title>byollm relay — debug</title>")
		}
	})
}

func TestDebugPage_EmptyRelay(t *testing.T) { // RB-E2, RB-E3, RB-E4
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		page := debugPage(t, b, b.adminURL, "/debug", http.MethodGet)
		require.True(t, strings.HasPrefix(strings.ToLower(page), "<!doctype html>"))
		require.Contains(t, page, "<title>byollm relay — debug</title>")
		require.Contains(t, page, `<meta http-equiv="refresh" content="1">`)
		require.Contains(t, page, "prefers-color-scheme: dark")
		require.Contains(t, page, "Routed jobs (0)")
		require.Contains(t, page, "nothing routed yet")
		require.Contains(t, page, "Presence (0)")
		require.Contains(t, page, "no devices connected")
		require.NotRegexp(t, `(?i)<(script|link|img)\b|src=|href=`, page, "self-contained: no external assets")
	})
}

func TestDebugPage_ShowsJobsAndDevicesButNoLeaseIdOrCiphertext(t *testing.T) { // RB-E3, RB-E4, RB-E5
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.paired(t, "bob")
		b.enqueue(t, b.stub(t, "job-claimed", "alice", streaming(true)), b.stub(t, "job-sealed", "alice"), b.stub(t, "job-queued", "alice", kind(protocol.KindChat)))
		jobs := b.claim(t, d, 2)
		require.Len(t, jobs, 2)
		env := b.seal(t, jobs[1], `{"prompt":"secret prompt text"}`)

		page := debugPage(t, b, b.adminURL, "/debug", http.MethodGet)
		require.Contains(t, page, "Routed jobs (3)")
		require.Contains(t, page, "Presence (2)")
		require.NotContains(t, page, "nothing routed yet")
		require.NotContains(t, page, "no devices connected")

		row := rowOf(t, page, "job-claimed")
		require.Regexp(t, `<b style="color:#c98a00">awaiting-payload</b> \d+ms left`, row)
		require.Contains(t, row, "<td>yes</td>", "stream column")
		require.Contains(t, row, d.Keys().KeyID(), "claimed by the device's key id")
		row = rowOf(t, page, "job-sealed")
		require.Contains(t, row, `<b style="color:#0a7">ready</b>`)
		require.Contains(t, row, "<td>sealed</td>")
		row = rowOf(t, page, "job-queued")
		require.Contains(t, row, `<b style="color:#8a8a8a">queued</b>`)
		require.Contains(t, row, "llm.chat")
		require.NotContains(t, row, "ms left")

		people := rowOf(t, page, "runner_bob")
		require.Contains(t, people, b.keys["bob"].KeyID())
		require.Regexp(t, `\d+ms ago`, people)
		require.Contains(t, people, "active")

		for _, c := range jobs {
			require.NotContains(t, page, c.Lease.ID, "no lease ids")
		}
		require.NotContains(t, page, env.Ciphertext, "no ciphertext")
		require.NotContains(t, page, env.Ciphertext[:16])
		require.NotContains(t, page, "secret prompt text")
	})
}

func TestDebugPage_DoesNotSweep(t *testing.T) { // RB-E1, RB-B18
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		b.claimOne(t, d, "job-1")
		b.advance(11 * time.Second)
		row := rowOf(t, debugPage(t, b, b.adminURL, "/debug", http.MethodGet), "job-1")
		require.Contains(t, row, "awaiting-payload")
		require.Equal(t, "runner_alice", b.requireState(t, "job-1", store.AwaitingPayload).ClaimedBy.RunnerID)
	})
}

func TestDebugPage_ShowsDoneJobsWithTheirDisposition(t *testing.T) { // RB-E3
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		b.runToDone(t, d, c)
		row := rowOf(t, debugPage(t, b, b.adminURL, "/debug", http.MethodGet), "job-1")
		require.Contains(t, row, `<b style="color:#444">done</b>`)
		require.Contains(t, row, "<td>ok</td>")
		res, err := b.site.Results(b.ctx)
		require.NoError(t, err)
		require.NotContains(t, row, res.Jobs[0].Envelope.Ciphertext[:16])
	})
}

func TestDebugPage_NamesAnOwnerWithoutConsent(t *testing.T) { // RB-E4, RB-C3, RB-G19
	eachStore(t, &setupOpts{Fixture: []fixtureMod{withConsent("bob", true)}}, func(t *testing.T, b *bundle) {
		b.paired(t, "alice")
		b.paired(t, "bob")
		b.project(t, withRevocation("alice"))
		page := debugPage(t, b, b.adminURL, "/debug", http.MethodGet)
		require.Contains(t, rowOf(t, page, "runner_alice"), `<b style="color:#c00">no consent</b>`)
		// Paused is not revoked: bob still shows as active.
		bob := rowOf(t, page, "runner_bob")
		require.Contains(t, bob, "active")
		require.NotContains(t, bob, "no consent")
	})
}

func TestDebugPage_EscapesHTMLInEveryTextValue(t *testing.T) { // RB-E5
	const owner = `<b>&"x"</b>'`
	const escaped = `&lt;b&gt;&amp;&quot;x&quot;&lt;/b&gt;'` // single quotes are left alone
	odd := func(f *projection.Fixture, k keyring) {
		f.Consents = append(f.Consents, projection.ConsentRecord{Owner: owner, SiteID: siteMain})
		f.Devices = append(f.Devices, projection.DeviceRecord{Owner: owner, RunnerID: `runner_<i>`, Device: k["stranger"].Public()})
	}
	eachStore(t, &setupOpts{Fixture: []fixtureMod{odd}}, func(t *testing.T, b *bundle) {
		d := b.daemon(t, "stranger")
		resp, err := d.Pair(b.ctx, owner)
		require.NoError(t, err)
		require.Equal(t, `runner_<i>`, resp.RunnerID)
		b.enqueue(t, b.stub(t, `job-<script>`, owner))

		page := debugPage(t, b, b.adminURL, "/debug", http.MethodGet)
		require.Equal(t, 2, strings.Count(page, escaped), "the owner in the job table and in presence")
		require.Contains(t, page, "runner_&lt;i&gt;")
		require.Contains(t, page, "job-&lt;script&gt;")
		require.NotContains(t, page, `<b>&"x"`)
		require.NotContains(t, page, "<i>")
		require.NotContains(t, page, "<script>")
	})
}

// rowOf returns the one table row of page that mentions text.
func rowOf(t *testing.T, page, text string) string {
	t.Helper()
	var found []string
	for _, row := range regexp.MustCompile(`(?s)<tr>.*?</tr>`).FindAllString(page, -1) {
		if strings.Contains(row, text) {
			found = append(found, row)
		}
	}
	require.Len(t, found, 1, "rows mentioning %q", text)
	return found[0]
}

func TestAdmin_HealthAndReadinessWithTheProjectionHash(t *testing.T) { // design §7, issue 2 /readyz
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		resp := b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/healthz"})
		require.Equal(t, 200, resp.Status)
		require.Equal(t, []string{"application/json"}, resp.Header.Values("Content-Type"))

		ready := func(status int, state string) {
			t.Helper()
			resp := b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/readyz"})
			require.Equal(t, status, resp.Status, "%s", resp.Body)
			require.Equal(t, []string{"application/json"}, resp.Header.Values("Content-Type"))
			var body struct{ Status, Projection string }
			require.NoError(t, json.Unmarshal(resp.Body, &body))
			require.Equal(t, state, body.Status)
			require.Regexp(t, `^[0-9a-f]{64}$`, body.Projection)
			require.Equal(t, b.source.Current().Hash(), body.Projection)
		}
		ready(200, "ready")
		first := b.source.Current().Hash()
		b.project(t, withConsent("carol", false))
		require.NotEqual(t, first, b.source.Current().Hash())
		ready(200, "ready") // now with the new hash

		b.admin.Drain()
		ready(503, "draining")
		// Draining stops readiness, not liveness or service.
		resp = b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/healthz"})
		require.Equal(t, 200, resp.Status)
		b.paired(t, "alice")
	})
}

func TestAdmin_UnknownPathsAreTheJSON404(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		for _, path := range []string{"/nope", "/byollm/claim", "/relay/site/enqueue"} {
			requireAnswer(t, b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodPost, Path: path}), 404, bodyNotFoundPath)
		}
	})
}
