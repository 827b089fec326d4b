//go:build opcost7f

package bench

import (
	"context"
	"fmt"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/valkey"
)

// newOpDriver drives the store API as of 7f63abf, where the operations
// had other names (Seen, Seal, TakePayload, Complete, Awaiting, Finished)
// and there was no heartbeat. Built only with -tags opcost7f, in a checkout
// of that commit with the opcost files copied in (docs/performance.md).
// The calls that did not change since are in opcost_driver.go.
func newOpDriver(ctx context.Context, addr, prefix string) (opDriver, error) {
	st, err := valkey.New(ctx, valkey.Options{Addrs: []string{addr}, KeyPrefix: prefix})
	if err != nil {
		return nil, err
	}
	d := &storeDriver{st: st, party: newOpParty()}
	if _, err := st.Seen(ctx, store.SeenInput{RunnerID: d.party.runner, Owner: d.party.owner, Device: d.party.device}); err != nil {
		st.Close()
		return nil, fmt.Errorf("pair: %w", err)
	}
	return d, nil
}

func (d *storeDriver) payload(ctx context.Context, site, jobID string, deadline int64) error {
	return d.st.Seal(ctx, store.SealInput{JobID: jobID, SiteID: site, Envelope: d.party.envelope(protocol.DirectionPayload, deadline)})
}

func (d *storeDriver) fetch(ctx context.Context, site, jobID, leaseID string) error {
	_, err := d.st.TakePayload(ctx, d.lease(site, jobID, leaseID))
	return err
}

func (d *storeDriver) touch(ctx context.Context) error {
	_, err := d.st.Touch(ctx, d.party.runner)
	return err
}

// heartbeat did not exist before protocol "2".
func (d *storeDriver) heartbeat(context.Context) error { return errNotInStore }

func (d *storeDriver) result(ctx context.Context, site, jobID, leaseID string, deadline int64) error {
	_, err := d.st.Complete(ctx, store.CompleteInput{LeaseInput: d.lease(site, jobID, leaseID),
		Envelope: d.party.envelope(protocol.DirectionResult, deadline), Disposition: "ok"})
	return err
}

func (d *storeDriver) pending(ctx context.Context, site string) error {
	_, err := d.st.Awaiting(ctx, site)
	return err
}

func (d *storeDriver) results(ctx context.Context, site string) error {
	_, err := d.st.Finished(ctx, site)
	return err
}
