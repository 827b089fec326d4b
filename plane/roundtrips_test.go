package plane_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/plane"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/ratelimit"
)

// TestOneStoreRoundTripPerDaemonCall counts the commands a Valkey server
// runs for each protocol "0" daemon call. With the limiter's buckets in
// the store (a Stored RunnerLimit, as the server wires it), the presence check and
// the rate charge go with the call's own operation: one command for a
// claim, a fetch, a result, a release or a heartbeat (whose stamp,
// sweep, cancel list and renewal are one operation), where checking them
// apart takes three.
func TestOneStoreRoundTripPerDaemonCall(t *testing.T) {
	srv := valkeytest.Start(t) // its own server: every command it counts is this test's
	rate := ratelimit.Rate{Every: time.Millisecond, Burst: 1000}
	b := setup(t, valkeyStoreOn(srv), &setupOpts{RateLimit: rate, SiteRateLimit: rate})
	b.paired(t, "alice")
	commands := commandCounter(t, srv)

	for _, tc := range []struct {
		name            string
		apart           bool
		claim, fetchRes int
		heartbeat       int
		release         int
	}{
		{name: "admitted in the operation", claim: 1, fetchRes: 1, heartbeat: 1, release: 1},
		{name: "checked apart", apart: true, claim: 3, fetchRes: 3, heartbeat: 3, release: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := b.config(b.store)
			if tc.apart {
				cfg.RunnerLimit = ratelimit.Apart(cfg.RunnerLimit.Limiter())
			}
			relay := httptest.NewServer(plane.New(cfg).Handler())
			t.Cleanup(relay.Close)
			d := b.daemonAt(t, "alice", relay.URL, "runner_alice")
			// The first lifecycle loads every script the calls use.
			for round := range 2 {
				id := tc.name[:3] + strconv.Itoa(round)
				stub := b.stub(t, id, "alice") // reads the store clock
				enqueue := commands(func() { b.enqueue(t, stub) })
				var c protocol.ClaimedStub
				claim := commands(func() { c = b.claimOne(t, d, id) })
				seal := commands(func() { b.seal(t, c, `{"prompt":"p"}`) })
				fetch := commands(func() {
					_, err := d.Fetch(b.ctx, c.ID, c.Lease.ID)
					require.NoError(t, err)
				})
				heartbeat := commands(func() {
					_, err := d.Heartbeat(b.ctx, []protocol.LeaseRef{{JobID: c.ID, LeaseID: c.Lease.ID}})
					require.NoError(t, err)
				})
				result := commands(func() { b.finish(t, d, c, `{"outcome":{"text":"r"}}`) })
				release := commands(func() {
					_, err := d.Release(b.ctx, []protocol.LeaseRef{{JobID: c.ID, LeaseID: c.Lease.ID}}, protocol.ReasonShutdown)
					require.NoError(t, err)
				})
				if round == 0 {
					continue
				}
				require.Equal(t, tc.claim, claim, "claim")
				require.Equal(t, tc.fetchRes, fetch, "fetch")
				require.Equal(t, tc.fetchRes, result, "result")
				require.Equal(t, tc.heartbeat, heartbeat, "heartbeat")
				require.Equal(t, tc.release, release, "release")
				// The site's writes charge within their operation too; its
				// reads cannot (read-only scripts): a seal is the pending
				// poll's charge, sweep and listing, then the payload.
				require.Equal(t, 1, enqueue, "enqueue")
				require.Equal(t, 4, seal, "pending and payload")
			}
		})
	}
}

// commandCounter returns a function that runs do and says how many
// script calls srv ran meanwhile: the relay's store sends nothing else
// (commandstats counts the commands a script runs too, under their own
// names, so only the script calls are round trips).
func commandCounter(t *testing.T, srv *valkeytest.Server) func(do func()) int {
	c := srv.Client(t)
	total := func() int {
		info, err := c.Do(t.Context(), c.B().Info().Section("commandstats").Build()).ToString()
		require.NoError(t, err)
		n := 0
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
			if !ok || !strings.HasPrefix(name, "eval") && !strings.HasPrefix(name, "fcall") {
				continue
			}
			calls, _, _ := strings.Cut(rest, ",")
			v, err := strconv.Atoi(calls)
			require.NoError(t, err)
			n += v
		}
		return n
	}
	return func(do func()) int {
		before := total()
		do()
		return total() - before
	}
}

// TestOneStoreRoundTripPerV2DaemonCall counts the script calls of each
// protocol "2" daemon call: its rate charge and its presence write go
// with its operation, one call in all, where they took three (a heartbeat
// five: charge, sweep, stamp, cancelRequests, renew).
func TestOneStoreRoundTripPerV2DaemonCall(t *testing.T) {
	srv := valkeytest.Start(t)
	opts := bothProtocols()
	opts.RateLimit = ratelimit.Rate{Every: time.Millisecond, Burst: 1000}
	b := setup(t, valkeyStoreOn(srv), opts)
	commands := commandCounter(t, srv)
	d := b.device2(t, "alice")
	site := b.site2(t, "site", siteMain)
	for round := range 2 {
		stub := site.stub2(t, "v2-"+strconv.Itoa(round), "alice")
		site.enqueued(t, stub)
		var jobs []proto2.ClaimedStub
		claim := commands(func() { jobs = d.claimed(t, 1) })
		require.Len(t, jobs, 1)
		c := jobs[0]
		site.seal(t, c, `{"prompt":"p"}`)
		fetch := commands(func() { require.Equal(t, http.StatusOK, d.fetch(t, c.ID, c.Lease.ID).Status) })
		heartbeat := commands(func() { require.Equal(t, http.StatusOK, d.heartbeat(t, grant(c)).Status) })
		env := b.sealedResult(t, d, "site", c, `{"outcome":{"text":"r"}}`)
		result := commands(func() { require.Equal(t, http.StatusOK, d.result(t, c.ID, c.Lease.ID, env).Status) })
		release := commands(func() { require.Equal(t, http.StatusOK, d.release(t, "shutdown", grant(c)).Status) })
		if round == 0 {
			continue // the first round loads the scripts
		}
		for name, calls := range map[string]int{"claim": claim, "fetch": fetch, "result": result, "release": release, "heartbeat": heartbeat} {
			require.Equal(t, 1, calls, name)
		}
	}
}
