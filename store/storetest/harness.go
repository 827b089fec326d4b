// Package storetest is the one behaviour contract every RoutingStore must
// pass. A store package runs it from its own tests with Run and a function
// that builds a fresh, empty store for each case.
//
// Cases are plain functions, listed per operation (enqueueContract,
// claimContract, ...), and every case runs in parallel with the others. So
// the harness function must isolate each case completely: its own store,
// and a clock lever that moves that store's clock only (the memory store
// gets a manual clock of its own; the Valkey store a fresh key prefix,
// under which its test clock lever lives too).
//
// Every store rule is asserted here and only here, so the memory and Valkey
// stores cannot drift apart.
package storetest

import (
	"testing"
	"time"

	"github.com/byollm/relayd/store"
)

// Harness is one fresh store under test and the levers the contract needs.
type Harness struct {
	// Store is empty when handed over.
	Store store.RoutingStore
	// Advance moves the store's clock forward by d. Between calls the store
	// clock must stand still, so that the contract can assert exact stamps
	// (expiresAt = now + leaseMs) without racing a running clock; a store
	// whose clock is a server's (Valkey TIME) pins it in its test harness.
	Advance func(t *testing.T, d time.Duration)
	// WriteUnparseableJob stores a queued job under id for siteID whose stored
	// stub no longer parses (as a record written by an older or broken
	// writer would be). Stores that keep no serialised records leave it nil,
	// and the case that needs it is skipped for them.
	WriteUnparseableJob func(t *testing.T, id, siteID, owner, kind string)
	// WriteUnparseableJob2 is WriteUnparseableJob for a protocol-2 job, one
	// a v2 claim would otherwise see; nil skips its case likewise.
	WriteUnparseableJob2 func(t *testing.T, id, siteID, owner, kind string)
	// Allow charges one request to key through the store's own rate
	// limiter of one request every `every`, bursts of burst (whose buckets
	// an admission's Charge of that rate spends from), and reports
	// whether it was allowed, or else the wait.
	Allow func(t *testing.T, key string, every time.Duration, burst int) (bool, time.Duration)
	// SitesApart says the store keeps Site and OtherSite apart, as the
	// sharded Valkey layout does with sites in different buckets: order
	// across the two sites is then each site's own, and protocol "0"'s
	// check that an id is not another site's does not span them. The
	// cases that read either take that form.
	SitesApart bool
}

// NewHarness builds a fresh harness for one test case, isolated from every
// other case (they run in parallel). It registers any cleanup with t.
type NewHarness func(t *testing.T) Harness

// cancelRequests is a proto-0 CancelRequests as bare job ids.
func (b *bundle) cancelRequests(runner string) ([]string, error) {
	grants, err := b.s.CancelRequests(b.ctx, store.CancelRequestsInput{Proto: store.Proto0, RunnerID: runner})
	if err != nil {
		return nil, err
	}
	ids := []string{}
	for _, g := range grants {
		ids = append(ids, g.JobID)
	}
	return ids, nil
}

// lostJobs is the job ids of a renewal's lost grants.
func lostJobs(res store.RenewResult) []string {
	ids := []string{}
	for _, g := range res.Lost {
		ids = append(ids, g.JobID)
	}
	return ids
}
