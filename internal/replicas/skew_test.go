package replicas_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/workload"
	"github.com/byollm/relayd/protocol"
)

// Replicas whose own clocks are 60 s fast, right and 60 s slow still act as
// one relay. Each checks signature freshness against its own clock (as the
// protocol says), while leases and deadlines come from Valkey's TIME: the
// race passes, and every lease's grant time, whichever replica granted it,
// lies within its claim's round trip on this machine's clock.
//
// relayd has no clock setting, and libfaketime cannot move a Go program's
// clock (Go reads it through the vDSO), so the replicas run with the
// hidden, test-only --test-clock-offset flag.
func TestClockSkew_ReplicasSixtySecondsApartStillActAsOne(t *testing.T) {
	eachProtocol(t, testClockSkew)
}

func testClockSkew(t *testing.T, proto string) {
	offsets := []time.Duration{60 * time.Second, 0, -60 * time.Second}
	r := protoRig(t, proto, rigOptions{fleet: fleet.Options{ReplicaArgs: func(i int) []string {
		return []string{"--test-clock-offset", offsets[i].String()}
	}}})
	urls := r.fleet.PublicURLs()

	// Each replica's clock really is shifted: its heartbeat serverTime.
	dev := r.fx.Keys.Devices[0]
	for i, base := range urls {
		d := r.daemonAt(dev, base)
		sent := time.Now()
		hb, err := d.Heartbeat(r.ctx, nil)
		require.NoError(t, err)
		mid := sent.Add(time.Since(sent) / 2)
		skew := time.UnixMilli(hb.ServerTime).Sub(mid)
		require.InDelta(t, offsets[i].Seconds(), skew.Seconds(), 2, "replica %d's clock is off by %s", i, skew)
	}

	// And freshness follows each replica's own clock: a request issued 70 s
	// ago is 130 s old to the fast replica and 10 s old to the slow one.
	site := r.siteAt(urls[0])
	issued := time.Now().Add(-70 * time.Second).UnixMilli()
	path := "/relay/site/pending?siteId=" + url.QueryEscape(site.SiteID())
	fast, err := site.Raw(r.ctx, peer.RawRequest{BaseURL: urls[0], Path: path, Header: site.SignHeadersAt("site/pending", nil, issued)})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, fast.Status, "%s", fast.Body)
	require.Contains(t, string(fast.Body), `"error":"`+string(protocol.CodeClockSkew)+`"`)
	slow, err := site.Raw(r.ctx, peer.RawRequest{BaseURL: urls[2], Path: path, Header: site.SignHeadersAt("site/pending", nil, issued)})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, slow.Status, "%s", slow.Body)

	rep := requireClean(t, r.runWorkload(workload.Config{Protocol: proto, Jobs: sizeFor(proto, faultJobs(t), 4), ReplayFraction: 0.1}))
	requireEveryProtocolServed(t, proto, rep)
	// Every replica granted leases, and each one's grant time sits within
	// a second of its claim on this machine's clock (Check holds each
	// lease to that): the fast and the slow replica agree with the right
	// one, not with their own clocks 60 s away.
	for _, base := range urls {
		host := base[len("http://"):]
		off, granted := rep.LeaseOffsetMs[host]
		require.True(t, granted, "replica %s granted leases", host)
		// Far below the 60 s skew, with room for a loaded machine.
		require.Less(t, off, int64(10_000), "replica %s: lease times off by up to %d ms", host, off)
	}
}
