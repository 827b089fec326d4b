package replicas_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// The routing rules "2" has and "0" lacks (shared/spec/protocol-2.md §4.1,
// §4.4, §4.5), under daemons racing each other through different replicas:
// each replica runs its own claims, so only the store's one atomic script
// per operation can keep them.

// grab is one job a racing claim got.
type grab struct {
	daemon int
	job    proto2.ClaimedStub
}

// claimRace has every daemon claim (max 8) rounds times at once, each
// through its own replicas, and returns every job granted.
func claimRace(t *testing.T, r *rig, daemons []*peer.Daemon2, rounds int) []grab {
	t.Helper()
	var mu sync.Mutex
	var got []grab
	var wg sync.WaitGroup
	for i, d := range daemons {
		wg.Go(func() {
			for range rounds {
				resp, err := d.Claim(r.ctx, []string{protocol.KindGenerate}, 8)
				if err != nil {
					t.Errorf("claim of daemon %d: %v", i, err)
					return
				}
				mu.Lock()
				for _, j := range resp.Jobs {
					got = append(got, grab{daemon: i, job: j})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got
}

// bySite counts grabs per stub site key id.
func bySite(grabs []grab) map[string]int {
	out := map[string]int{}
	for _, g := range grabs {
		out[g.job.Site]++
	}
	return out
}

// At most two unsealed jobs per (site, owner), however many of the owner's
// devices claim at once through however many replicas; the cap is per
// site, so a second site's jobs of the same owner have two slots of their
// own; sealing one frees exactly one slot. The two sites use the same job
// ids, and each grant's calls resolve by its lease first: the payload a
// daemon fetches under a lease is the one its own site sealed.
func TestV2_UnsealedCapPerSiteAndOwnerHoldsAcrossReplicas(t *testing.T) {
	r := newRig(t, rigOptions{extraSites: 1})
	urls := r.fleet.PublicURLs()
	owner := r.fx.Owners[0]
	main, extra := r.site2At(urls[0]), r.site2Of(r.fx.ExtraSites[0], urls[1])
	for i := range 6 {
		_, err := main.Enqueue(r.ctx, r.stub2(main, fmt.Sprintf("cap-%d", i), owner))
		require.NoError(t, err)
	}
	for i := range 3 {
		_, err := extra.Enqueue(r.ctx, r.stub2(extra, fmt.Sprintf("cap-%d", i), owner))
		require.NoError(t, err)
	}
	var daemons []*peer.Daemon2
	for i, dev := range r.fx.DevicesOf(owner) {
		daemons = append(daemons, r.daemon2At(dev, urls[i%len(urls)], urls[(i+1)%len(urls)]))
	}

	first := claimRace(t, r, daemons, 5)
	require.Equal(t, map[string]int{main.Keys().KeyID(): 2, extra.Keys().KeyID(): 2}, bySite(first),
		"two unsealed grants per (site, owner): %v", describeGrabs(first))
	requireNoJobTwice(t, first)
	pending, err := main.Pending(r.ctx)
	require.NoError(t, err)
	require.Len(t, pending.Jobs, 2, "the main site has two jobs awaiting their payload")

	// Seal every grant, each by its own site, then fetch each under its
	// lease through another replica: the lease picks the job, not the id.
	sites := map[string]*peer.Site2{main.Keys().KeyID(): main, extra.Keys().KeyID(): extra}
	for _, g := range first {
		site := sites[g.job.Site]
		p, err := site.AwaitPending(r.ctx, g.job.ID)
		require.NoError(t, err)
		require.Equal(t, g.job.Lease.ID, p.LeaseID, "each site's pending names its own job's grant")
		_, err = site.SendPayload(r.ctx, p, g.job.DeadlineAt, json.RawMessage(`{"site":"`+site.SiteID()+`","job":"`+g.job.ID+`"}`))
		require.NoError(t, err)
	}
	for _, g := range first {
		ran, err := daemons[g.daemon].Work(r.ctx, g.job, func(p json.RawMessage) (json.RawMessage, error) { return p, nil }, peer.Steps{FetchFor: 20 * time.Second})
		require.NoError(t, err, "grant %s of %s", g.job.Lease.ID, g.job.ID)
		require.JSONEq(t, `{"site":"`+sites[g.job.Site].SiteID()+`","job":"`+g.job.ID+`"}`, string(ran.Payload))
	}

	// All four sealed: each pair has two free slots again, and the
	// remaining jobs (four of the main site's, one of the other) fill them.
	second := claimRace(t, r, daemons, 5)
	require.Equal(t, map[string]int{main.Keys().KeyID(): 2, extra.Keys().KeyID(): 1}, bySite(second), "%v", describeGrabs(second))
	requireNoJobTwice(t, append(first, second...))
}

// requireNoJobTwice fails when one (site, id) was granted twice.
func requireNoJobTwice(t *testing.T, grabs []grab) {
	t.Helper()
	seen := map[string]grab{}
	for _, g := range grabs {
		key := g.job.Site + "/" + g.job.ID
		if old, dup := seen[key]; dup {
			t.Fatalf("%s granted twice: to daemon %d (lease %s) and daemon %d (lease %s)", key, old.daemon, old.job.Lease.ID, g.daemon, g.job.Lease.ID)
		}
		seen[key] = g
	}
}

func describeGrabs(grabs []grab) []string {
	var out []string
	for _, g := range grabs {
		out = append(out, fmt.Sprintf("%s/%s→%d", g.job.Site[:12], g.job.ID, g.daemon))
	}
	return out
}

// A job whose claimant lets its sealing window lapse is offered again only
// to that claimant, however many other devices of its owner race for it
// through other replicas; after its third unsealed lapse it is evicted.
// Two sites run this at once under the same job id, claimed first by two
// different devices.
func TestV2_LapsedJobIsReofferedOnlyToItsClaimantAndEvictedOnTheThirdLapse(t *testing.T) {
	r := newRig(t, rigOptions{extraSites: 1, fleet: fleet.Options{SweepInterval: 100 * time.Millisecond}})
	urls := r.fleet.PublicURLs()
	owner := r.fx.Owners[0]
	st := r.store()
	main, extra := r.site2At(urls[0]), r.site2Of(r.fx.ExtraSites[0], urls[1])
	var daemons []*peer.Daemon2
	for i, dev := range r.fx.DevicesOf(owner) {
		daemons = append(daemons, r.daemon2At(dev, urls[i%len(urls)], urls[(i+1)%len(urls)]))
	}
	// Daemon 0 claims the main site's job and daemon 1 the other site's:
	// each site's job is enqueued just before its claimant claims.
	claimants := map[string]int{}
	for i, site := range []*peer.Site2{main, extra} {
		_, err := site.Enqueue(r.ctx, r.stub2(site, "sticky", owner))
		require.NoError(t, err)
		got, err := daemons[i].Claim(r.ctx, []string{protocol.KindGenerate}, 1)
		require.NoError(t, err)
		require.Len(t, got.Jobs, 1)
		require.Equal(t, site.Keys().KeyID(), got.Jobs[0].Site)
		claimants[got.Jobs[0].Site] = i
	}

	// Nobody seals. Every device keeps claiming, through its replicas,
	// until both jobs are gone from the store.
	var grabs []grab
	gone := func() bool {
		for _, id := range []string{r.fx.SiteID, r.fx.ExtraSites[0].SiteID} {
			if _, ok, err := st.Job(r.ctx, id, "sticky"); err != nil || ok {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(60 * time.Second)
	for !gone() {
		require.True(t, time.Now().Before(deadline), "both jobs evicted within three sealing windows: %v", describeGrabs(grabs))
		grabs = append(grabs, claimRace(t, r, daemons, 1)...)
		time.Sleep(50 * time.Millisecond) // pace the rounds; the loop's condition is what it waits for
	}
	perSite := map[string]int{}
	for _, g := range grabs {
		require.Equal(t, claimants[g.job.Site], g.daemon, "a lapsed job went to daemon %d, not its first claimant %d", g.daemon, claimants[g.job.Site])
		perSite[g.job.Site]++
	}
	// The first grant was the hand claim; the second and third came to
	// the claimant after the first and second lapses; the third lapse
	// evicted the job.
	require.Equal(t, map[string]int{main.Keys().KeyID(): 2, extra.Keys().KeyID(): 2}, perSite, "%v", describeGrabs(grabs))
	for _, site := range []*peer.Site2{main, extra} {
		pending, err := site.Pending(r.ctx)
		require.NoError(t, err)
		require.Empty(t, pending.Jobs, "an evicted job is no longer pending")
	}
	require.Empty(t, claimRace(t, r, daemons, 1), "an evicted job is offered to nobody")
}
