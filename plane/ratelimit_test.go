package plane_test

// Per-caller rate limits (design.md §3, RB-G26): a token bucket per verified
// runner, per verified site and per pairing client address, kept where the
// routing state is and shared by every replica on it.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	vk "github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/plane"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store/valkey"
)

// bodyRateLimited is the 429 body; retryAfter is whole seconds, as the
// protocol's WireError defines it (decision P2-D1).
func bodyRateLimited(retryAfterSeconds int64) string {
	return `{"error":"rate-limited","message":"too many requests from this caller; wait retryAfter seconds and try again","retryAfter":` +
		strconv.FormatInt(retryAfterSeconds, 10) + `}`
}

// requireRateLimited checks a 429 byte for byte, with its Retry-After
// header equal to the body's retryAfter.
func requireRateLimited(t *testing.T, resp peer.RawResponse, retryAfterSeconds int64) {
	t.Helper()
	requireAnswer(t, resp, http.StatusTooManyRequests, bodyRateLimited(retryAfterSeconds))
	require.Equal(t, []string{strconv.FormatInt(retryAfterSeconds, 10)}, resp.Header.Values("Retry-After"))
}

func TestRB_G26_RunnerOverItsRateIs429AndTheRefusedRequestChangesNothing(t *testing.T) {
	opts := &setupOpts{RateLimit: ratelimit.Rate{Every: time.Minute, Burst: 2}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		for range 2 {
			resp, err := d.Do(b.ctx, "heartbeat", heartbeatBody(t, "runner_alice"))
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.Status)
		}
		seen, _ := b.presence(t, "runner_alice")
		before := b.dumpState(t)

		b.advance(1500 * time.Millisecond)
		resp, err := d.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
		require.NoError(t, err)
		requireRateLimited(t, resp, 59)
		require.Equal(t, before, b.dumpState(t), "no grant, and presence not stamped at the later store time")
		p, _ := b.presence(t, "runner_alice")
		require.Equal(t, seen.LastSeenAt, p.LastSeenAt)

		// Refused requests took nothing: one token is back a minute after
		// the last one was taken.
		b.advance(58_500 * time.Millisecond)
		b.claimOne(t, d, "job-1")
		_, err = d.Heartbeat(b.ctx, nil)
		requireRefused(t, err, http.StatusTooManyRequests, bodyRateLimited(60))
	})
}

func TestRB_G26_RateLimitedAnswerRoundsRetryAfterUpToWholeSeconds(t *testing.T) {
	opts := &setupOpts{RateLimit: ratelimit.Rate{Every: 1500 * time.Millisecond, Burst: 1}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		_, err := d.Heartbeat(b.ctx, nil)
		require.NoError(t, err)
		resp, err := d.Do(b.ctx, "heartbeat", heartbeatBody(t, "runner_alice"))
		require.NoError(t, err)
		requireRateLimited(t, resp, 2)
	})
}

// The runner is charged only once its signature checks, so that nobody
// can spend a runner's tokens by naming it; and a stranger learns nothing
// of the bucket either, getting the same refusal whether it is empty or
// not.
func TestRB_G26_StrangerNamingARunnerCannotDrainItsBucket(t *testing.T) {
	opts := &setupOpts{RateLimit: ratelimit.Rate{Every: time.Hour, Burst: 1}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		impostor := b.daemonAt(t, "stranger", b.url, "runner_alice")
		body := claimBody(t, "runner_alice")
		for range 5 {
			resp, err := impostor.Do(b.ctx, "claim", body)
			require.NoError(t, err)
			requireAnswer(t, resp, 401, bodyBadSignature)
			requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: body}), 401, bodyNotSigned)
		}
		resp, err := d.Do(b.ctx, "claim", body)
		require.NoError(t, err)
		requireAnswer(t, resp, 200, emptyClaim)

		resp, err = d.Do(b.ctx, "claim", body)
		require.NoError(t, err)
		requireRateLimited(t, resp, 3600)
		resp, err = impostor.Do(b.ctx, "claim", body)
		require.NoError(t, err)
		requireAnswer(t, resp, 401, bodyBadSignature)
	})
}

func TestRB_G26_SiteOverItsRateIs429AndEachSiteHasItsOwnBucket(t *testing.T) {
	opts := &setupOpts{SiteRateLimit: ratelimit.Rate{Every: time.Hour, Burst: 1}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		_, err := b.site.Pending(b.ctx)
		require.NoError(t, err)
		resp := siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", enqueueBody(t, siteMain, b.stub(t, "job-1", "alice")))
		requireRateLimited(t, resp, 3600)
		b.requireNoJob(t, "job-1")

		// The other registered site is charged to its own bucket, and an
		// impostor signing as the site is refused before any charge.
		_, err = b.otherSite.Pending(b.ctx)
		requireRefused(t, err, 403, bodyNotRoutedForYou)
		_, err = b.siteAs(t, "stranger", siteMain).Pending(b.ctx)
		requireRefused(t, err, 401, bodyBadSignature)

		// Daemons are not charged to the site's bucket.
		d := b.paired(t, "alice")
		resp, err = d.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
		require.NoError(t, err)
		requireAnswer(t, resp, 200, emptyClaim)
	})
}

func TestRB_G26_PairIsChargedToTheClientAddress(t *testing.T) {
	opts := &setupOpts{RateLimit: ratelimit.Rate{Every: time.Hour, Burst: 2}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		pair := pairBody(t, "alice", b.keys["alice"].Public())
		b.requireUndeclared(t, postPair(t, b, []byte(`{}`)), 400, bodyPairSchema)
		require.Equal(t, 200, postPair(t, b, pair).Status)
		requireRateLimited(t, postPair(t, b, pair), 3600)

		// Without --trust-forwarded-for the header is the caller's to
		// write, so it changes nothing.
		forwarded := peer.RawRequest{Method: http.MethodPost, Path: "/byollm/pair", Body: pair, Header: http.Header{"X-Forwarded-For": {"198.51.100.7"}}}
		requireRateLimited(t, b.raw(t, forwarded), 3600)

		// A paired runner has its own bucket, full.
		_, err := b.daemonAt(t, "alice", b.url, "runner_alice").Heartbeat(b.ctx, nil)
		require.NoError(t, err)
	})
}

func TestRB_G26_BehindALoadBalancerPairIsChargedToTheLastForwardedAddress(t *testing.T) {
	opts := &setupOpts{RateLimit: ratelimit.Rate{Every: time.Hour, Burst: 1}, TrustForwardedFor: true}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		pair := pairBody(t, "alice", b.keys["alice"].Public())
		from := func(xff ...string) peer.RawResponse {
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/pair", Body: pair, Header: http.Header{"X-Forwarded-For": xff}})
		}
		require.Equal(t, 200, from("198.51.100.7").Status)
		requireRateLimited(t, from("198.51.100.7"), 3600)
		// Entries before the last are the client's own words: spoofing them
		// does not buy a new bucket.
		requireRateLimited(t, from("203.0.113.1, 198.51.100.7"), 3600)
		requireRateLimited(t, from("203.0.113.1", "198.51.100.7"), 3600)
		// Another client is another bucket, with or without its port.
		require.Equal(t, 200, from("198.51.100.8").Status)
		requireRateLimited(t, from("198.51.100.8:4444"), 3600)
		// IPv6 is charged per /64, and an IPv4-mapped address as IPv4.
		require.Equal(t, 200, from("2001:db8:1:2::1").Status)
		requireRateLimited(t, from("2001:db8:1:2:ffff::9"), 3600)
		requireRateLimited(t, from("::ffff:198.51.100.8"), 3600)
		// Without a usable header, the connection's address is charged.
		require.Equal(t, 200, from("not an address").Status)
		requireRateLimited(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/pair", Body: pair}), 3600)
	})
}

// Two replicas on one Valkey charge one caller's requests to one bucket,
// whichever replica each request reaches.
func TestRB_G26_ReplicasOnOneValkeyLimitACallerTogether(t *testing.T) {
	opts := &setupOpts{RateLimit: ratelimit.Rate{Every: time.Hour, Burst: 3}}
	b := setup(t, valkeyStore, opts)
	vs := b.store.(*valkey.Store)
	// The second replica has its own connection, as another process would.
	other, err := valkey.NewFromClientForTest(valkeytest.Shared(t).Client(t), vs.Prefix())
	require.NoError(t, err)
	second := b.replica(t, other)

	daemons := []*peer.Daemon{b.paired(t, "alice"), b.daemonAt(t, "alice", second, "runner_alice")}
	for i := range 3 {
		resp, err := daemons[i%2].Do(b.ctx, "claim", claimBody(t, "runner_alice"))
		require.NoError(t, err)
		requireAnswer(t, resp, 200, emptyClaim)
	}
	for _, d := range daemons {
		resp, err := d.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
		require.NoError(t, err)
		requireRateLimited(t, resp, 3600)
	}
}

// failingLimiter cannot answer, as a limiter whose Valkey is gone.
type failingLimiter struct{}

func (failingLimiter) Allow(context.Context, string) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.New("limiter unavailable")
}

// A limiter that cannot answer lets requests through (fail open; see
// codec.Env.Charge for why): never a 500, never a refusal of its own.
func TestRB_G26_LimiterThatCannotAnswerLetsRequestsThrough(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		limiters := map[string]ratelimit.Limiter{"failing": failingLimiter{}}
		if vs, ok := b.store.(*valkey.Store); ok {
			// A real Valkey limiter on a connection that is closed.
			conn, err := vk.NewClient(vk.ClientOption{InitAddress: valkeytest.Shared(t).Addrs, ForceSingleClient: true, DisableCache: true})
			require.NoError(t, err)
			closed, err := valkey.NewFromClient(conn, vs.Prefix())
			require.NoError(t, err)
			l, err := closed.Limiter(ratelimit.Rate{Every: time.Hour, Burst: 1})
			require.NoError(t, err)
			conn.Close()
			limiters["closed valkey"] = l
		}
		for name, l := range limiters {
			cfg := b.config(b.store)
			cfg.RunnerLimit, cfg.SiteLimit = ratelimit.Apart(l), ratelimit.Apart(l)
			srv := httptest.NewServer(plane.New(cfg).Handler())
			t.Cleanup(srv.Close)

			requireAnswer(t, b.raw(t, peer.RawRequest{BaseURL: srv.URL, Method: http.MethodPost, Path: "/byollm/pair", Body: pairBody(t, "alice", b.keys["alice"].Public())}),
				200, `{"protocolVersion":"0","runnerId":"runner_alice","site":`+string(mustJSON(t, b.keys["site"].Public()))+`}`)
			resp, err := b.daemonAt(t, "alice", srv.URL, "runner_alice").Do(b.ctx, "claim", claimBody(t, "runner_alice"))
			require.NoError(t, err)
			requireAnswer(t, resp, 200, emptyClaim)
			site, err := peer.NewSite(b.clientConfig(srv.URL), b.keys["site"], siteMain)
			require.NoError(t, err)
			_, err = site.Pending(b.ctx)
			require.NoError(t, err, name)
		}
		_, ok := b.presence(t, "runner_alice")
		require.True(t, ok)
	})
}

// TestRB_G26_ASiteRefusedBeforeItsWriteIsStillCharged: a site's write takes
// its charge within the store operation, so a call refused before it
// (here its schema) pays on its own first; over the rate, the refused
// call is told so instead, as when the charge came first.
func TestRB_G26_ASiteRefusedBeforeItsWriteIsStillCharged(t *testing.T) {
	opts := &setupOpts{SiteRateLimit: ratelimit.Rate{Every: time.Hour, Burst: 2}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		resp := siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", []byte(`{"siteId":"site_main"}`))
		require.Equal(t, http.StatusBadRequest, resp.Status, "refused by its schema: %s", resp.Body)
		_, err := b.site.Enqueue(b.ctx, b.stub(t, "job-1", "alice"))
		require.NoError(t, err, "the second request of two")
		resp = siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", []byte(`{"siteId":"site_main"}`))
		requireRateLimited(t, resp, 3600)
		resp = siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", enqueueBody(t, siteMain, b.stub(t, "job-2", "alice")))
		requireRateLimited(t, resp, 3600)
		b.requireNoJob(t, "job-2")
	})
}
