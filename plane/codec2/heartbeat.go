package codec2

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// heartbeat checks the daemon's version against the floor, refreshes its
// presence with what it offers, and renews what it holds (§3.9).
func (c *Codec) heartbeat(ctx context.Context, who *caller, req proto2.HeartbeatRequest) (proto2.HeartbeatResponse, error) {
	var none proto2.HeartbeatResponse
	if refusal := c.belowFloor(req.DaemonVersion); refusal != nil {
		return none, c.refuse(ctx, who, refusal)
	}
	serverTime := c.env.NowMs()
	offered, err := presenceOf(req)
	if err != nil {
		return none, err
	}
	owner := who.device.Owner
	pinned := who.proj.SitesFor(owner)
	// One store call writes the presence with what the daemon offers,
	// sweeps and, for a daemon serving a site, lists what to cancel and
	// renews: only grants on jobs of the sites pinned, so that a job of a
	// site whose consent was withdrawn is lost and lapses (RD-D12).
	admit := who.admission()
	admit.Pair.Capabilities, admit.Pair.Withheld = offered.Capabilities, offered.Withheld
	hb, err := c.env.Store.Heartbeat(ctx, store.HeartbeatInput{
		Proto: store.Proto2, RunnerID: who.device.RunnerID, Admit: admit,
		Serving: len(pinned) > 0, Leases: req.ActiveLeases, LeaseMs: c.env.LeaseMs, Sites: siteIDs(pinned),
	})
	if err != nil {
		return none, storeError(store.OpHeartbeat, err)
	}
	c.env.Swept(ctx, hb.Swept)
	resp := proto2.HeartbeatResponse{
		Sites:           sitesByKeyID(pinned),
		Successions:     successions(pinned),
		UpdateTo:        proto2.UpdateTo(c.opts.UpdateOffer, req.DaemonVersion),
		AwaitingConsent: keyIDs(who.proj.AwaitingConsentFor(owner)),
		ServerTime:      serverTime,
	}
	if len(pinned) == 0 {
		// Serving no site: nothing is renewed, and everything held is
		// lost, as the reference answers (P2-S13).
		resp.Cancel, resp.Lost = []proto2.GrantRef{}, nonNil(req.ActiveLeases)
		return resp, nil
	}
	resp.Cancel, resp.Lost = nonNil(hb.Cancel), nonNil(hb.Renewed.Lost)
	return resp, nil
}

// belowFloor is the 426 for a daemon older than --daemon-floor, if set.
func (c *Codec) belowFloor(daemonVersion string) *proto2.Refusal {
	if c.opts.DaemonFloor == "" {
		return nil
	}
	return proto2.CheckFloor(daemonVersion, c.opts.DaemonFloor)
}

// presenceOf is what a heartbeat says the daemon offers, as presence keeps
// it: the validated lists, re-encoded.
func presenceOf(req proto2.HeartbeatRequest) (store.PairInput, error) {
	caps, err := proto2.Marshal(nonNil(req.Capabilities))
	if err != nil {
		return store.PairInput{}, fmt.Errorf("encode capabilities: %w", err)
	}
	withheld, err := proto2.Marshal(nonNil(req.Withheld))
	if err != nil {
		return store.PairInput{}, fmt.Errorf("encode withheld: %w", err)
	}
	return store.PairInput{Proto: store.Proto2, Capabilities: json.RawMessage(caps), Withheld: json.RawMessage(withheld)}, nil
}

// sitesByKeyID is the sites map of a heartbeat or pairing answer: each
// site's current public identity under its key id, in the order given.
func sitesByKeyID(sites []projection.SiteRecord) proto2.Keyed[proto2.PublicIdentity] {
	out := proto2.Keyed[proto2.PublicIdentity]{}
	for _, s := range sites {
		out = put(out, keyID(s.Site), s.Site)
	}
	return out
}

// successions is the heartbeat's successions: the chain of each pinned
// site that rotated, under its current key id.
func successions(sites []projection.SiteRecord) proto2.Keyed[proto2.SiteSuccession] {
	var out proto2.Keyed[proto2.SiteSuccession]
	for _, s := range sites {
		if len(s.Succeeds) == 0 {
			continue
		}
		chain := make([]proto2.Succession, 0, len(s.Succeeds))
		for _, link := range s.Succeeds {
			chain = append(chain, proto2.Succession{Identity: link.Identity, Signature: link.Signature})
		}
		out = put(out, keyID(s.Site), proto2.SiteSuccession{Succeeds: chain, RetiringUntil: s.RetiringUntil})
	}
	return out
}

// put sets key to v as a JavaScript object assignment does: a new key goes
// last, an existing one keeps its place and takes the new value.
func put[T any](k proto2.Keyed[T], key string, v T) proto2.Keyed[T] {
	for i := range k {
		if k[i].Key == key {
			k[i].Value = v
			return k
		}
	}
	return append(k, proto2.Entry[T]{Key: key, Value: v})
}

// keyIDs lists the sites' current key ids, never null.
func keyIDs(sites []projection.SiteRecord) []string {
	out := make([]string, 0, len(sites))
	for _, s := range sites {
		out = append(out, keyID(s.Site))
	}
	return out
}
