package valkey

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// BenchmarkProto2 measures what protocol "2" adds, each beside its
// protocol-"0" counterpart in the same run, with 1k and 100k proto-2 jobs
// stored (queued for an owner nobody serves): a claim on a route at its
// unsealed cap (against a claim that finds nothing), a fetch resolved
// lease first (against one named by site), and a sweep of lapsing
// sealing windows (against one of lapsing leases), per job settled.
func BenchmarkProto2(b *testing.B) {
	s, _ := benchStore(b)
	ctx := context.Background()
	have, round := 0, 0
	tag := func() string { round++; return "p" + strconv.Itoa(round) }
	for _, n := range []int{1_000, 100_000} {
		fillProto(b, s, store.Proto2, "idle", "nobody", have, n)
		have = n
		name := "stored=" + strconv.Itoa(n/1000) + "k"
		b.Run(name+"/claim-empty/proto0", func(b *testing.B) {
			in := claimInput("r1", 64)
			in.Routes = []store.Route{{SiteID: testSite, Owner: "dave"}}
			claimLoop(b, s, in, 0)
		})
		b.Run(name+"/claim-capped/proto2", func(b *testing.B) {
			owner := "capped-" + tag()
			fillProto(b, s, store.Proto2, owner, owner, 0, store.UnsealedPerRoute+1000)
			in := claimInput("r1", 64)
			in.Proto, in.Routes = store.Proto2, []store.Route{{SiteID: testSite, Owner: owner}}
			if got, err := s.Claim(ctx, in); err != nil || len(got) != store.UnsealedPerRoute {
				b.Fatalf("claim to the cap: %v %d", err, len(got))
			}
			claimLoop(b, s, in, 0)
		})
		b.Run(name+"/fetch-by-site/proto0", func(b *testing.B) {
			cs := claimedN(b, s, tag(), b.N)
			sealAll(b, s, cs)
			b.ResetTimer()
			for _, c := range cs[:b.N] {
				in := leaseOf(c)
				in.SiteID = testSite
				if _, err := s.Fetch(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/fetch-lease-first/proto2", func(b *testing.B) {
			cs := claimedSealed2(b, s, tag(), b.N)
			b.ResetTimer()
			for _, c := range cs {
				in := leaseOf(c)
				in.Proto = store.Proto2
				if _, err := s.Fetch(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/sweep-lapsing/proto0", func(b *testing.B) { sweepLapsing(b, s, store.Proto0, tag) })
		b.Run(name+"/sweep-lapsing/proto2", func(b *testing.B) { sweepLapsing(b, s, store.Proto2, tag) })
	}
}

func claimLoop(b *testing.B, s *Store, in store.ClaimInput, want int) {
	b.Helper()
	b.ResetTimer()
	for range b.N {
		if got, err := s.Claim(context.Background(), in); err != nil || len(got) != want {
			b.Fatalf("claim: %v %d", err, len(got))
		}
	}
}

// claimedSealed2 enqueues, claims and seals n proto-2 jobs of one owner,
// two at a time as the unsealed cap allows.
func claimedSealed2(b *testing.B, s *Store, tag string, n int) []protocol.ClaimedStub {
	b.Helper()
	owner := "owner-" + tag
	fillProto(b, s, store.Proto2, tag, owner, 0, n)
	in := claimInput("r1", store.UnsealedPerRoute)
	in.Proto, in.Routes = store.Proto2, []store.Route{{SiteID: testSite, Owner: owner}}
	var out []protocol.ClaimedStub
	for len(out) < n {
		got, err := s.Claim(context.Background(), in)
		if err != nil || len(got) == 0 {
			b.Fatalf("claim: %v", err)
		}
		sealAll(b, s, got)
		out = append(out, got...)
	}
	return out
}

// sweepLapsing measures sweeps that each find a full batch of grants
// whose time ran out: sealing windows of proto-2 jobs (counted and
// re-offered), or leases of ready proto-0 jobs, per job settled.
func sweepLapsing(b *testing.B, s *Store, p store.Proto, tag func() string) {
	ctx := context.Background()
	settled := 0
	for range b.N {
		b.StopTimer()
		t := tag()
		in := claimInput("r1", sweepBatch)
		in.Proto = p
		// Two jobs per route, so the unsealed cap does not stop the claim.
		for i := range sweepBatch / 2 {
			owner := t + "-" + strconv.Itoa(i)
			fillProto(b, s, p, owner, owner, 0, 2)
			in.Routes = append(in.Routes, store.Route{SiteID: testSite, Owner: owner})
		}
		got, err := s.Claim(ctx, in)
		if err != nil || len(got) != sweepBatch {
			b.Fatalf("claim: %v %d", err, len(got))
		}
		if p == store.Proto0 {
			sealAll(b, s, got)
		}
		advance(b, s, time.Duration(in.LeaseMs)*time.Millisecond+time.Millisecond)
		b.StartTimer()
		res, err := s.Sweep(ctx)
		// Grants of the other benchmarks may fall due too: count them all.
		if err != nil || len(res.Requeued) < sweepBatch || (p == store.Proto2 && len(res.Lapsed) < sweepBatch) {
			b.Fatalf("sweep: %v %d %d", err, len(res.Requeued), len(res.Lapsed))
		}
		settled += len(res.Requeued) + len(res.Expired)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(settled), "ns/job-settled")
}
