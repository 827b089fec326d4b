//go:build !opcost7f

package bench

import (
	"context"
	"fmt"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// newOpDriver drives this tree's store API; opcost_store7f.go has the same
// for the store as of 7f63abf, whose operations had other names.
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

func (d *storeDriver) payload(ctx context.Context, site, jobID string, deadline int64) error {
	return d.st.Payload(ctx, store.PayloadInput{JobID: jobID, SiteID: site, Envelope: d.party.envelope(protocol.DirectionPayload, deadline)})
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

func (d *storeDriver) pending(ctx context.Context, site string) error {
	_, err := d.st.Pending(ctx, site)
	return err
}

func (d *storeDriver) results(ctx context.Context, site string) error {
	_, err := d.st.Results(ctx, site)
	return err
}
