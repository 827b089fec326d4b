package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// The cases of protocol "2" follow the published contract
// (@byollm/relay/store-contract, spec protocol-2 §6.4): each says which
// published case it is, and the rest pin what §2.4.3, §4 and the decisions
// add. They claim, enqueue and resolve with store.Proto2, and name jobs
// to holder-scoped calls lease first (no site), as the v2 codec does.

// The audiences of protocol "2".
const (
	audiencePrivate = "private"
	audienceTeam    = "team"
)

// sealingWindow is how long a site has to seal a claimed job.
const sealingWindow = protocol.AwaitingPayloadMs * time.Millisecond

// stub2 is a v2 stub as the published suite makes them: a private
// generate job of alice, due in an hour.
func (b *bundle) stub2(t *testing.T, id string, opts ...stubOpt) protocol.JobStub {
	return b.stub(t, id, append([]stubOpt{forAudience(audiencePrivate)}, opts...)...)
}

func (b *bundle) enqueue2On(t *testing.T, site string, s protocol.JobStub) store.EnqueueResult {
	res, err := b.s.Enqueue(b.ctx, store.EnqueueInput{SiteID: site, Proto: store.Proto2, Stub: s})
	require.NoError(t, err)
	return res
}

// enqueue2 publishes v2 stubs of alice for Site.
func (b *bundle) enqueue2(t *testing.T, ids ...string) {
	for _, id := range ids {
		b.enqueue2On(t, Site, b.stub2(t, id))
	}
}

// on is one route.
func on(site, owner string) store.Route { return store.Route{SiteID: site, Owner: owner} }

// claim2 is a v2 claim by d for up to max jobs of every kind on the routes
// given ((Site, d's owner) when none are).
func (b *bundle) claim2(t *testing.T, d device, max int, routes ...store.Route) []protocol.ClaimedStub {
	if len(routes) == 0 {
		routes = []store.Route{on(Site, d.owner)}
	}
	return b.claimInput(t, store.ClaimInput{
		Proto: store.Proto2, RunnerID: d.runner, Owner: d.owner, Device: identityOf(d), Routes: routes,
		Kinds: []string{protocol.KindGenerate, protocol.KindChat}, Max: max, LeaseMs: leaseMs,
	})
}

// claim2One claims exactly one job for d under protocol "2".
func (b *bundle) claim2One(t *testing.T, d device, routes ...store.Route) protocol.ClaimedStub {
	got := b.claim2(t, d, 1, routes...)
	require.Len(t, got, 1)
	return got[0]
}

// lease2 names a grant as a v2 daemon does: job id and lease, no site.
func lease2(c protocol.ClaimedStub) store.LeaseInput {
	return store.LeaseInput{Proto: store.Proto2, JobID: c.ID, RunnerID: c.Lease.RunnerID, LeaseID: c.Lease.ID}
}

func (b *bundle) fetch2(c protocol.ClaimedStub) (protocol.SealedEnvelope, error) {
	return b.s.Fetch(b.ctx, lease2(c))
}

func (b *bundle) release2(t *testing.T, in store.ReleaseInput) []string {
	in.Proto = store.Proto2
	got, err := b.s.Release(b.ctx, in)
	require.NoError(t, err)
	return got
}

func (b *bundle) renew2(t *testing.T, runner string, leases ...protocol.LeaseRef) store.RenewResult {
	res, err := b.s.Renew(b.ctx, store.RenewInput{Proto: store.Proto2, RunnerID: runner, Leases: leases, LeaseMs: leaseMs})
	require.NoError(t, err)
	return res
}

func (b *bundle) result2(c protocol.ClaimedStub, disposition string) (store.ResultOutcome, error) {
	return b.s.Result(b.ctx, store.ResultInput{LeaseInput: lease2(c), Envelope: envelopeFor(c.Lease.RunnerID, protocol.DirectionResult, c.ID+"-"+disposition), Disposition: disposition})
}

func (b *bundle) complete2(t *testing.T, c protocol.ClaimedStub, disposition string) store.ResultOutcome {
	res, err := b.result2(c, disposition)
	require.NoError(t, err)
	return res
}

// sealOn seals a site's claimed job to its holder's device.
func (b *bundle) sealOn(t *testing.T, site string, c protocol.ClaimedStub) {
	require.NoError(t, b.s.Payload(b.ctx, store.PayloadInput{JobID: c.ID, SiteID: site, Envelope: envelopeFor(c.Lease.RunnerID, protocol.DirectionPayload, c.ID)}))
}

// runToDone2 takes a v2 grant through seal, fetch and result.
func (b *bundle) runToDone2(t *testing.T, site string, c protocol.ClaimedStub) {
	b.sealOn(t, site, c)
	_, err := b.fetch2(c)
	require.NoError(t, err)
	require.False(t, b.complete2(t, c, protocol.DispositionOK).Duplicate)
}

func (b *bundle) cancel(t *testing.T, site, id string) bool {
	ok, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: id, SiteID: site})
	require.NoError(t, err)
	return ok
}

func (b *bundle) cancelRequests2(t *testing.T, runner string) []protocol.LeaseRef {
	got, err := b.s.CancelRequests(b.ctx, store.CancelRequestsInput{Proto: store.Proto2, RunnerID: runner})
	require.NoError(t, err)
	return got
}

func (b *bundle) sweep(t *testing.T) store.SweepResult {
	res, err := b.s.Sweep(b.ctx)
	require.NoError(t, err)
	return res
}

// lapse lets the sealing window of every grant made now run out, and sweeps.
func (b *bundle) lapse(t *testing.T) store.SweepResult {
	b.advance(t, sealingWindow)
	return b.sweep(t)
}

func (b *bundle) jobOn(t *testing.T, site, id string) store.Job {
	j, ok, err := b.s.Job(b.ctx, site, id)
	require.NoError(t, err)
	require.True(t, ok, "job (%s, %s) exists", site, id)
	return j
}

func (b *bundle) pair(t *testing.T, in store.PairInput) store.Presence {
	p, err := b.s.Pair(b.ctx, in)
	require.NoError(t, err)
	return p
}

func (b *bundle) presence(t *testing.T, runner string) store.Presence {
	p, ok, err := b.s.Presence(b.ctx, runner)
	require.NoError(t, err)
	require.True(t, ok, "presence of %s", runner)
	return p
}
