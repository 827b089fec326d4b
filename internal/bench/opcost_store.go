//go:build !opcost7f

package bench

import (
	"context"
	"fmt"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// storeDriver drives this tree's store API. opcost_store7f.go is the same
// for the store as of 7f63abf, whose operations had other names; it is
// built only with -tags opcost7f, copied into a checkout of that commit.
type storeDriver struct {
	st    store.RoutingStore
	party opParty
}

func newOpDriver(ctx context.Context, addr, prefix string) (opDriver, error) {
	st, err := openValkey(ctx, addr, prefix)
	if err != nil {
		return nil, err
	}
	d := &storeDriver{st: st, party: newOpParty()}
	if _, err := st.Pair(ctx, store.PairInput{RunnerID: d.party.runner, Owner: d.party.owner, Device: d.party.device}); err != nil {
		st.Close()
		return nil, fmt.Errorf("pair: %w", err)
	}
	return d, nil
}

func (d *storeDriver) enqueue(ctx context.Context, site, id string, deadline int64) error {
	_, err := d.st.Enqueue(ctx, store.EnqueueInput{SiteID: site, Stub: d.party.stub(id, deadline)})
	return err
}

func (d *storeDriver) presence(ctx context.Context) error {
	_, _, err := d.st.Presence(ctx, d.party.runner)
	return err
}

func (d *storeDriver) claim(ctx context.Context, site string) (string, string, error) {
	granted, err := d.st.Claim(ctx, store.ClaimInput{RunnerID: d.party.runner, Owner: d.party.owner, Device: d.party.device,
		Routes: []store.Route{{SiteID: site, Owner: d.party.owner}}, Kinds: []string{protocol.KindGenerate}, Max: 1, LeaseMs: opLeaseMs, Touch: true})
	if err != nil {
		return "", "", err
	}
	if len(granted) != 1 {
		return "", "", fmt.Errorf("claim granted %d jobs, not one", len(granted))
	}
	return granted[0].ID, granted[0].Lease.ID, nil
}

func (d *storeDriver) payload(ctx context.Context, site, jobID string, deadline int64) error {
	return d.st.Payload(ctx, store.PayloadInput{JobID: jobID, SiteID: site, Envelope: d.party.envelope(protocol.DirectionPayload, deadline)})
}

func (d *storeDriver) lease(_, jobID, leaseID string) store.LeaseInput {
	return store.LeaseInput{JobID: jobID, RunnerID: d.party.runner, LeaseID: leaseID, Touch: true}
}

func (d *storeDriver) fetch(ctx context.Context, site, jobID, leaseID string) error {
	_, err := d.st.Fetch(ctx, d.lease(site, jobID, leaseID))
	return err
}

func (d *storeDriver) touch(ctx context.Context) error {
	_, err := d.st.Touch(ctx, store.TouchInput{RunnerID: d.party.runner})
	return err
}

// heartbeat is protocol "2"'s, serving the one site, holding no lease.
func (d *storeDriver) heartbeat(ctx context.Context) error {
	_, err := d.st.Heartbeat(ctx, store.HeartbeatInput{Proto: store.Proto2, SiteID: opSite, RunnerID: d.party.runner,
		Touch: true, Serving: true, LeaseMs: opLeaseMs, Sites: []string{opSite}})
	return err
}

func (d *storeDriver) result(ctx context.Context, site, jobID, leaseID string, deadline int64) error {
	_, err := d.st.Result(ctx, store.ResultInput{LeaseInput: d.lease(site, jobID, leaseID),
		Envelope: d.party.envelope(protocol.DirectionResult, deadline), Disposition: "ok"})
	return err
}

func (d *storeDriver) sweep(ctx context.Context) error {
	_, err := d.st.Sweep(ctx)
	return err
}

func (d *storeDriver) pending(ctx context.Context, site string) error {
	_, err := d.st.Pending(ctx, site)
	return err
}

func (d *storeDriver) results(ctx context.Context, site string) error {
	_, err := d.st.Results(ctx, site)
	return err
}

func (d *storeDriver) close() { d.st.Close() }
