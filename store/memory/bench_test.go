package memory_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
)

var (
	depths = []int{1_000, 10_000, 100_000, 1_000_000}
	// claimOneForAlice asks for one job of alice's on the site.
	claimOneForAlice = store.ClaimInput{RunnerID: "runner", Owner: "alice", Routes: []store.Route{{SiteID: "site", Owner: "alice"}},
		Kinds: []string{protocol.KindGenerate}, Max: 1, LeaseMs: 60_000}
)

// backlog returns a store with depth jobs of the site queued for an owner
// nobody serves, and a stub maker for more.
func backlog(b *testing.B, depth int) (*memory.Store, func(id, owner string) protocol.JobStub) {
	c := clock.NewManual(time.UnixMilli(1_750_000_000_000))
	s := memory.New(c)
	deadline := c.Now().Add(time.Hour).UnixMilli()
	stub := func(id, owner string) protocol.JobStub {
		return protocol.JobStub{ID: id, Kind: protocol.KindGenerate, Owner: owner, Site: "BYOLLM-BENCH",
			Audience: protocol.AudiencePublic, SizeClass: "small", DeadlineAt: deadline}
	}
	for i := range depth {
		if _, err := s.Enqueue(b.Context(), store.EnqueueInput{SiteID: "site", Stub: stub("idle-"+strconv.Itoa(i), "nobody")}); err != nil {
			b.Fatal(err)
		}
	}
	return s, stub
}

// BenchmarkClaimWithQueued measures a claim that grants one job while N
// jobs sit queued for an owner nobody serves: the backlog must not cost.
func BenchmarkClaimWithQueued(b *testing.B) {
	for _, depth := range depths {
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) {
			ctx := b.Context()
			s, stub := backlog(b, depth)
			in := claimOneForAlice
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				if _, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: "site", Stub: stub("job-"+strconv.Itoa(i), "alice")}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				got, err := s.Claim(ctx, in)
				if err != nil || len(got) != 1 {
					b.Fatalf("claim: %v, %d granted", err, len(got))
				}
			}
		})
	}
}

// BenchmarkListingsWithQueued measures the site's pending and results
// listings (one job in each) while N of the site's jobs sit queued: the
// site polls them, so the backlog must not cost.
func BenchmarkListingsWithQueued(b *testing.B) {
	for _, depth := range depths {
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) {
			ctx := b.Context()
			s, stub := backlog(b, depth)
			in := claimOneForAlice
			var granted []protocol.ClaimedStub
			for _, id := range []string{"done", "awaiting"} {
				if _, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: "site", Stub: stub(id, "alice")}); err != nil {
					b.Fatal(err)
				}
				got, err := s.Claim(ctx, in)
				if err != nil || len(got) != 1 {
					b.Fatalf("claim: %v, %d granted", err, len(got))
				}
				granted = append(granted, got...)
			}
			lease := store.LeaseInput{SiteID: "site", JobID: "done", RunnerID: "runner", LeaseID: granted[0].Lease.ID}
			// The result must be sealed by the holder's device (P2-D11).
			holder := store.Claim{Device: in.Device}
			sealed := protocol.SealedEnvelope{SenderKeyID: holder.HolderKeyID()}
			if _, err := s.Result(ctx, store.ResultInput{LeaseInput: lease, Envelope: sealed, Disposition: protocol.DispositionOK}); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				awaiting, err := s.Pending(ctx, "site")
				if err != nil || len(awaiting) != 1 {
					b.Fatalf("awaiting: %v, %d listed", err, len(awaiting))
				}
				finished, err := s.Results(ctx, "site")
				if err != nil || len(finished) != 1 {
					b.Fatalf("finished: %v, %d listed", err, len(finished))
				}
			}
		})
	}
}

// BenchmarkClaim2PastCappedRoute measures a protocol-2 claim on a route
// already holding its two unsealed grants while N of the route's jobs sit
// queued behind them: the claim grants nothing, and must not pay for the
// queue it may not draw from.
func BenchmarkClaim2PastCappedRoute(b *testing.B) {
	for _, depth := range depths {
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) {
			ctx := b.Context()
			s, stub := backlog(b, 0)
			for i := range depth + store.UnsealedPerRoute {
				if _, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: "site", Proto: store.Proto2, Stub: stub("job-"+strconv.Itoa(i), "alice")}); err != nil {
					b.Fatal(err)
				}
			}
			in := claimOneForAlice
			in.Proto, in.Max = store.Proto2, store.UnsealedPerRoute
			if got, err := s.Claim(ctx, in); err != nil || len(got) != store.UnsealedPerRoute {
				b.Fatalf("claim: %v, %d granted", err, len(got))
			}
			for b.Loop() {
				got, err := s.Claim(ctx, in)
				if err != nil || len(got) != 0 {
					b.Fatalf("claim: %v, %d granted past the cap", err, len(got))
				}
			}
		})
	}
}
