package plane_test

// The routing table of relay-behaviour.md RB-A1 and the transport rules of RB-A0:
// dispatch on the escaped path, the daemon plane by last segment under the
// base path, fixed site-plane paths, and no method checks.

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
)

const emptyClaim = `{"jobs":[],"leaseMs":60000}`

func TestRouting_DaemonPlaneDispatchesOnTheLastSegmentAtAnyDepth(t *testing.T) { // RB-A1.3, RB-G15
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		body := claimBody(t, "runner_alice")
		for _, path := range []string{"/byollm/anything/claim", "/byollm/a/b/c/claim", "/byollm//claim", "/byollm/claim?siteId=ignored&x=1"} {
			resp := b.raw(t, signedDaemon(d, http.MethodPost, path, "claim", body))
			requireAnswer(t, resp, 200, emptyClaim)
		}
		// Signed as the whole path, the same request fails: the endpoint is the segment.
		resp := b.raw(t, signedDaemon(d, http.MethodPost, "/byollm/anything/claim", "anything/claim", body))
		requireAnswer(t, resp, 401, bodyBadSignature)
	})
}

func TestRouting_PathsThatAreNotAnEndpointAre404(t *testing.T) { // RB-A1.2, RB-A1.3, RB-A1.5, RB-A0.5, RB-G3
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		body := claimBody(t, "runner_alice")
		cases := []struct{ path, endpoint string }{
			{"/byollm/claim/", "claim"},
			{"/byollm/claim/", ""},
			{"/byollm/cl%61im", "claim"},
			{"/byollm/cl%61im", "cl%61im"},
			{"/byollm", "claim"},
			{"/byollmclaim", "claim"},
			{"/BYOLLM/claim", "claim"},
			{"/healthz", ""},
			{"/readyz", ""},
			{"/metrics", ""},
			{"/debug", ""},
			{"/byollm/debug", ""},
			{"/", ""},
		}
		for _, c := range cases {
			resp := b.raw(t, signedDaemon(d, http.MethodPost, c.path, c.endpoint, body))
			requireAnswer(t, resp, 404, bodyNotFoundPath)
		}
		// Site-plane paths are exact: a trailing slash or an escape is a 404.
		for _, path := range []string{"/relay/site/enqueue/", "/relay/site/%65nqueue", "/relay/site/", "/relay/site/claim", "/relay/sites/enqueue", "/byollm/relay/site/enqueue"} {
			body := enqueueBody(t, siteMain, b.stub(t, "job-1", "alice"))
			resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: path, Header: b.site.SignHeaders("site/enqueue", body), Body: body})
			requireAnswer(t, resp, 404, bodyNotFoundPath)
		}
		b.requireNoJob(t, "job-1")
	})
}

func TestRouting_DotSegmentsAreResolvedBeforeDispatch(t *testing.T) { // RB-A0.5
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		body := claimBody(t, "runner_alice")
		for _, path := range []string{"/byollm/x/../claim", "/byollm/./claim", "/other/../byollm/claim", "/../byollm/claim", "/other/x/../../byollm/claim"} {
			resp := b.raw(t, signedDaemon(d, http.MethodPost, path, "claim", body))
			requireAnswer(t, resp, 200, emptyClaim)
		}
		// Resolution can also leave no endpoint, or leave the base path.
		for _, path := range []string{"/byollm/claim/..", "/byollm/claim/.", "/byollm/../claim", "/byollm/x/../../claim"} {
			resp := b.raw(t, signedDaemon(d, http.MethodPost, path, "claim", body))
			requireAnswer(t, resp, 404, bodyNotFoundPath)
		}
		// The site plane resolves too.
		h := b.site.SignHeaders("site/pending", nil)
		resp := b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/x/../site/pending?siteId=" + siteMain, Header: h})
		requireAnswer(t, resp, 200, `{"jobs":[]}`)
	})
}

func TestRouting_PercentEncodedDotSegmentsAreResolvedToo(t *testing.T) { // RB-A0.5
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		body := claimBody(t, "runner_alice")
		// A WHATWG URL parser treats %2e like "." in a dot segment, in any
		// case mix, whether or not the path also holds a literal dot.
		for _, path := range []string{"/other/%2e%2e/byollm/claim", "/other/%2E%2e/byollm/claim", "/other/.%2e/byollm/claim", "/byollm/%2e/claim"} {
			resp := b.raw(t, signedDaemon(d, http.MethodPost, path, "claim", body))
			requireAnswer(t, resp, 200, emptyClaim)
		}
		for _, path := range []string{"/byollm/%2e%2e/claim", "/byollm/%2E%2E/claim", "/byollm/claim/%2e", "/byollm/claim/%2e%2e"} {
			resp := b.raw(t, signedDaemon(d, http.MethodPost, path, "claim", body))
			requireAnswer(t, resp, 404, bodyNotFoundPath)
		}
	})
}

func TestRouting_MethodIsNeverCheckedAndOnlyPostHasABody(t *testing.T) { // RB-A0.3, RB-A0.6, RB-G16
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		// GET on claim passes auth over the empty body, then fails the schema.
		resp := b.raw(t, signedDaemon(d, http.MethodGet, "/byollm/claim", "claim", nil))
		b.requireUndeclared(t, resp, 400, bodySchema)

		// A PUT's body is not read: signed over "" it passes auth, signed
		// over the body it does not.
		body := claimBody(t, "runner_alice")
		resp = b.raw(t, peer.RawRequest{Method: http.MethodPut, Path: "/byollm/claim", Header: d.SignHeaders("claim", nil), Body: body})
		b.requireUndeclared(t, resp, 400, bodySchema)
		resp = b.raw(t, signedDaemon(d, http.MethodPut, "/byollm/claim", "claim", body))
		b.requireUndeclared(t, resp, 401, bodyBadSignature)

		// The same on the site plane, and on the unsigned pair.
		enq := enqueueBody(t, siteMain, b.stub(t, "job-1", "alice"))
		resp = b.raw(t, peer.RawRequest{Method: http.MethodPut, Path: "/relay/site/enqueue", Header: b.site.SignHeaders("site/enqueue", nil), Body: enq})
		requireAnswer(t, resp, 400, bodySchema)
		b.requireNoJob(t, "job-1")
		for _, m := range []string{http.MethodGet, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
			resp = b.raw(t, peer.RawRequest{Method: m, Path: "/byollm/pair", Body: pairBody(t, "alice", b.keys["alice"].Public())})
			b.requireUndeclared(t, resp, 400, bodyPairSchema)
		}

		// A POST to a read route has its body signed and then ignored (RB-A14.2).
		resp, err := b.site.Do(b.ctx, http.MethodPost, "pending", []byte(`{"anything":1}`))
		require.NoError(t, err)
		requireAnswer(t, resp, 400, bodySchema) // no siteId in the query
		resp = b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/pending?siteId=" + siteMain, Header: b.site.SignHeaders("site/pending", []byte(`{"anything":1}`)), Body: []byte(`{"anything":1}`)})
		requireAnswer(t, resp, 200, `{"jobs":[]}`)
	})
}

func TestRouting_EveryMethodReachesTheHandlerEvenOnesTheRouterDoesNotList(t *testing.T) { // RB-A0.6
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		// Methods outside the usual set (WebDAV and cache verbs, which Node's
		// HTTP parser accepts) must still go through auth, not get a 404.
		for _, m := range []string{"PURGE", "LOCK", "COPY", "MKCOL", "SEARCH"} {
			resp := b.raw(t, peer.RawRequest{Method: m, Path: "/byollm/claim"})
			b.requireUndeclared(t, resp, 401, bodyNotSigned)
			resp = b.raw(t, peer.RawRequest{Method: m, Path: "/relay/site/pending?siteId=" + siteMain})
			requireAnswer(t, resp, 401, bodyNotSigned)
		}
	})
}

func TestRouting_BasePathOptionMovesTheDaemonPlaneOnly(t *testing.T) { // RB-A1.1, RB-A1.2
	eachStore(t, &setupOpts{BasePath: "/custom/relay//"}, func(t *testing.T, b *bundle) {
		// The client drops trailing slashes as the relay does, so it pairs at /custom/relay/pair.
		d := b.paired(t, "alice")
		body := claimBody(t, "runner_alice")
		requireAnswer(t, b.raw(t, signedDaemon(d, http.MethodPost, "/custom/relay/claim", "claim", body)), 200, emptyClaim)
		requireAnswer(t, b.raw(t, signedDaemon(d, http.MethodPost, "/custom/relay/x/claim", "claim", body)), 200, emptyClaim)
		requireAnswer(t, b.raw(t, signedDaemon(d, http.MethodPost, "/byollm/claim", "claim", body)), 404, bodyNotFoundPath)
		requireAnswer(t, b.raw(t, signedDaemon(d, http.MethodPost, "/custom/relayclaim", "claim", body)), 404, bodyNotFoundPath)
		// The site plane does not move.
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		b.claimOne(t, d, "job-1")
		b.pending(t, "job-1")
	})
	eachStore(t, &setupOpts{BasePath: "/"}, func(t *testing.T, b *bundle) {
		// A root base path puts every last segment on the daemon plane,
		// while the site plane keeps its fixed paths.
		d := b.paired(t, "alice")
		body := claimBody(t, "runner_alice")
		requireAnswer(t, b.raw(t, signedDaemon(d, http.MethodPost, "/claim", "claim", body)), 200, emptyClaim)
		requireAnswer(t, b.raw(t, signedDaemon(d, http.MethodPost, "/anything/claim", "claim", body)), 200, emptyClaim)
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/healthz"}), 404, bodyNotFoundPath)
		b.enqueue(t, b.stub(t, "job-1", "alice"))
	})
}

func TestRouting_EveryResponseIsJSONWithNoCharset(t *testing.T) { // RB-A0.2
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		for _, resp := range []peer.RawResponse{
			b.raw(t, signedDaemon(d, http.MethodPost, "/byollm/claim", "claim", claimBody(t, "runner_alice"))),
			b.raw(t, signedDaemon(d, http.MethodPost, "/byollm/heartbeat", "heartbeat", heartbeatBody(t, "runner_alice"))),
			siteDo(b.ctx, t, b.site, http.MethodGet, "pending", nil),
			siteDo(b.ctx, t, b.site, http.MethodGet, "results", nil),
			postPair(t, b, pairBody(t, "alice", b.keys["alice"].Public())),
		} {
			require.Equal(t, 200, resp.Status, "%s", resp.Body)
			require.Equal(t, []string{"application/json"}, resp.Header.Values("Content-Type"))
			require.NotContains(t, string(resp.Body), "\n", "JSON.stringify output has no trailing newline")
		}
	})
}
