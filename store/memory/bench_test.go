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

// BenchmarkClaimWithQueued measures a claim that grants one job while N
// jobs sit queued for an owner nobody serves: the backlog must not cost.
func BenchmarkClaimWithQueued(b *testing.B) {
	for _, depth := range []int{1_000, 10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("queued=%d", depth), func(b *testing.B) {
			ctx := b.Context()
			c := clock.NewManual(time.UnixMilli(1_750_000_000_000))
			s := memory.New(c)
			deadline := c.Now().Add(time.Hour).UnixMilli()
			stub := func(id, owner string) protocol.JobStub {
				return protocol.JobStub{ID: id, Kind: protocol.KindGenerate, Owner: owner, Site: "BYOLLM-BENCH",
					Audience: protocol.AudiencePublic, SizeClass: "small", DeadlineAt: deadline}
			}
			for i := range depth {
				if _, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: "site", Stub: stub("idle-"+strconv.Itoa(i), "nobody")}); err != nil {
					b.Fatal(err)
				}
			}
			in := store.ClaimInput{RunnerID: "runner", Owner: "alice", Routes: []store.Route{{SiteID: "site", Owner: "alice"}},
				Kinds: []string{protocol.KindGenerate}, Max: 1, LeaseMs: 60_000}
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
