package bench

import (
	"context"
	"fmt"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// storeDriver is the opDriver over a Valkey store. The operations whose
// calls are the same in this tree and at 7f63abf are here, untagged; the
// ones that had other names then (and newOpDriver) are in opcost_store.go
// for this tree and in opcost_store7f.go, built only with -tags opcost7f,
// for a checkout of that commit with the opcost files copied in
// (docs/performance.md). Those two stay alike in shape on purpose: the old
// tree's API (other method and input type names) forces the second copy.
type storeDriver struct {
	st    store.RoutingStore
	party opParty
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

func (d *storeDriver) lease(_, jobID, leaseID string) store.LeaseInput {
	return store.LeaseInput{JobID: jobID, RunnerID: d.party.runner, LeaseID: leaseID, Touch: true}
}

func (d *storeDriver) sweep(ctx context.Context) error {
	_, err := d.st.Sweep(ctx)
	return err
}

func (d *storeDriver) close() { d.st.Close() }
