package replicas_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/internal/workload"
	"github.com/byollm/relayd/protocol"
)

// Three replicas on one Valkey, sixteen daemons and five thousand jobs
// through the full sealed lifecycle, every request spread round-robin: no
// job granted twice under live leases, none lost, every result collected
// exactly once and opened with the device key pending named, every
// deliberate replay answered duplicate, no 5xx. Under "2" two sites
// publish under the same ids; mixed has "0" and "2" peers at once, and no
// job reaches a daemon of the other protocol.
func TestRace_ThreeReplicasRouteEveryJobOnceToOneDevice(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto string) {
		r := protoRig(t, proto, rigOptions{})
		cfg := workload.Config{Protocol: proto, Jobs: sizeFor(proto, raceJobs(t), 8), ReplayFraction: 0.1}
		if proto == workload.ProtocolV2 {
			// Some jobs' first grant lapses unsealed: each must go back
			// to that grant's runner only, whichever replica the other
			// daemons claim through (Check's reoffer). Each costs a 10 s
			// window (the windows overlap), so only the "2" run does it.
			// At 1 % the 250 jobs of a -race run left none unsealed in
			// about one run of twelve (0.99^250), failing the check
			// below; 3 % leaves about 7, and none once in 2,000 runs.
			cfg.UnsealedFraction = 0.03
		}
		if cfg.Jobs > 10_000 {
			// Results stay listed until their deadline; a short one keeps the
			// listing (and every poll of it) bounded on long runs.
			cfg.JobTTL = time.Minute
		}
		rep := requireClean(t, r.runWorkload(cfg))
		require.Positive(t, rep.Replays, "some results were replayed")
		for _, base := range r.fleet.PublicURLs() {
			require.Positive(t, rep.Tries[base[len("http://"):]], "replica %s served requests", base)
		}
		requireEveryProtocolServed(t, proto, rep)
		if cfg.UnsealedFraction > 0 {
			require.Positive(t, rep.Unsealed, "some grants were left unsealed")
		}
	})
}

// requireEveryProtocolServed checks that each protocol the run speaks had
// its jobs granted and collected.
func requireEveryProtocolServed(t *testing.T, proto string, rep workload.Report) {
	t.Helper()
	for _, p := range []string{workload.ProtocolV0, workload.ProtocolV2} {
		if proto == p || proto == workload.ProtocolMixed {
			require.Positive(t, rep.CollectedByProtocol[p], "protocol %q jobs were collected", p)
		}
	}
}

// The same race against a Valkey Cluster of three primaries.
func TestRace_ClusterOfThreePrimaries(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto string) {
		r := protoRig(t, proto, rigOptions{valkey: valkeytest.StartCluster(t)})
		rep := requireClean(t, r.runWorkload(workload.Config{Protocol: proto, Jobs: sizeFor(proto, clusterJobs(t), 5), ReplayFraction: 0.1}))
		requireEveryProtocolServed(t, proto, rep)
	})
}

// Presence and the site's reads are the same whichever replica answers:
// every daemon is listed on every replica's debug page and recognised by
// every replica, and pending and results answer byte for byte the same
// from each replica at a quiet point.
func TestPresence_EveryReplicaSeesEveryDaemonAndTheSameQueues(t *testing.T) {
	r := newRig(t, rigOptions{spares: 1})
	requireClean(t, r.runWorkload(workload.Config{Jobs: 200}))

	// Leave some jobs waiting for their payload, so pending is not empty:
	// the spare device claims them through one replica and nobody seals.
	urls := r.fleet.PublicURLs()
	spare := r.fx.Spares[0]
	site := r.siteAt(urls[0])
	for _, id := range []string{"quiet-1", "quiet-2", "quiet-3"} {
		_, err := site.Enqueue(r.ctx, r.stub(site, id, spare.Owner))
		require.NoError(t, err)
	}
	d := r.daemonAt(spare, urls[1])
	claimed, err := d.Claim(r.ctx, []string{protocol.KindGenerate}, 8)
	require.NoError(t, err)
	require.Len(t, claimed.Jobs, 3)

	var pending, results [][]byte
	for i, base := range urls {
		s := r.siteAt(base)
		p, err := s.Do(r.ctx, http.MethodGet, "pending", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, p.Status, "pending from replica %d: %s", i, p.Body)
		res, err := s.Do(r.ctx, http.MethodGet, "results", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.Status, "results from replica %d", i)
		pending, results = append(pending, p.Body), append(results, res.Body)
	}
	var listed protocol.PendingResponse
	require.NoError(t, json.Unmarshal(pending[0], &listed))
	require.Len(t, listed.Jobs, 3)
	var finished protocol.ResultsResponse
	require.NoError(t, json.Unmarshal(results[0], &finished))
	require.Len(t, finished.Jobs, 200)
	for i := 1; i < len(urls); i++ {
		require.True(t, bytes.Equal(pending[0], pending[i]), "pending from replica %d differs from replica 0's", i)
		require.True(t, bytes.Equal(results[0], results[i]), "results from replica %d differs from replica 0's", i)
	}

	for i, admin := range r.fleet.AdminURLs() {
		status, page := get(t, r.ctx, admin+"/debug")
		require.Equal(t, http.StatusOK, status)
		for _, dev := range r.fx.Keys.Devices {
			require.Contains(t, string(page), "<td>"+dev.RunnerID+"</td>", "replica %d lists %s", i, dev.RunnerID)
		}
	}
	// Each daemon, paired through one replica during the run, is
	// recognised by every replica.
	for _, dev := range r.fx.Keys.Devices {
		for i, base := range urls {
			c, err := peer.NewDaemon(peer.Config{BaseURLs: []string{base}, HTTPClient: plainClient()}, dev.Keys, dev.RunnerID)
			require.NoError(t, err)
			_, err = c.Heartbeat(r.ctx, nil)
			require.NoError(t, err, "%s through replica %d", dev.RunnerID, i)
		}
	}
}

// With the per-site rate limit on, the replicas share one budget (it lives
// in Valkey): a volley of the site's requests spread over all three gets no
// more through than one bucket allows, where a budget per replica would let
// three times the burst through.
func TestRateLimit_OneSiteBudgetAcrossReplicas(t *testing.T) {
	const burst, volley = 5, 30
	r := newRig(t, rigOptions{fleet: fleet.Options{Args: []string{"--site-rate-limit", "1/s", "--site-rate-burst", "5"}}})
	urls := r.fleet.PublicURLs()
	sites := make([]*peer.Site, len(urls))
	for i, u := range urls {
		sites[i] = r.siteAt(u)
	}
	start := time.Now()
	allowed, limited := 0, 0
	for i := range volley {
		_, err := sites[i%len(sites)].Pending(r.ctx)
		switch {
		case err == nil:
			allowed++
		case peer.ErrorStatus(err) == http.StatusTooManyRequests:
			limited++
		default:
			require.NoError(t, err)
		}
	}
	// One bucket refills one token a second; the volley's own duration is
	// the only allowance, so a slow machine loosens the bound, never trips it.
	refill := int(time.Since(start).Seconds()) + 1
	require.LessOrEqual(t, allowed, burst+refill, "one budget across the replicas (%d allowed, %d limited)", allowed, limited)
	require.Positive(t, limited)
	require.Equal(t, volley, allowed+limited)
}
