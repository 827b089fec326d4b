package valkey

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
)

// listingJobs and listingResultBytes shape the results poll measured in
// docs/performance.md ("Results listing"): 3,000 finished jobs of 1 KiB
// results, as a site sees them.
const (
	listingJobs        = 3000
	listingResultBytes = 1024
)

// serverCounters reads what the server has sent its clients and the time
// it spent in scripts, read-only or not.
func serverCounters(b *testing.B, c valkey.Client) (sent, scriptUsec int64) {
	b.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("everything").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_net_output_bytes:"); ok {
			sent, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	_, scriptUsec = scriptStats(info)
	return sent, scriptUsec
}

// finishAll takes every job of a store, of testSite, to a recorded result
// of size bytes.
func finishAll(b *testing.B, s store.RoutingStore, size int) {
	b.Helper()
	ctx := context.Background()
	for {
		got, err := s.Claim(ctx, claimInput("r1", protocol.MaxClaim))
		if err != nil {
			b.Fatal(err)
		}
		if len(got) == 0 {
			return
		}
		for _, c := range got {
			lease := store.LeaseInput{SiteID: testSite, JobID: c.ID, RunnerID: c.Lease.RunnerID, LeaseID: c.Lease.ID}
			if err := s.Payload(ctx, store.PayloadInput{JobID: c.ID, SiteID: testSite, Envelope: env(protocol.DirectionPayload, c.ID)}); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Fetch(ctx, lease); err != nil {
				b.Fatal(err)
			}
			e := env(protocol.DirectionResult, c.ID)
			e.Ciphertext += strings.Repeat("x", max(0, size-len(e.Ciphertext)))
			if _, err := s.Result(ctx, store.ResultInput{LeaseInput: lease, Envelope: e, Disposition: "ok"}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkResultsListing measures a site's results poll over 3,000
// finished jobs when nothing changed since the last poll, against Valkey
// (bytes the server sent and its script time per poll) and against the
// memory store holding the same jobs.
func BenchmarkResultsListing(b *testing.B) {
	ctx := context.Background()
	b.Run("valkey", func(b *testing.B) {
		s, client := benchStore(b)
		fill(b, s, "done", "alice", 0, listingJobs)
		finishAll(b, s, listingResultBytes)
		if got, err := s.Results(ctx, testSite); err != nil || len(got) != listingJobs {
			b.Fatalf("listing of %d jobs, err %v", len(got), err)
		}
		sent0, usec0 := serverCounters(b, client)
		b.ResetTimer()
		for range b.N {
			if _, err := s.Results(ctx, testSite); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		sent1, usec1 := serverCounters(b, client)
		b.ReportMetric(float64(sent1-sent0)/float64(b.N), "valkey-bytes/poll")
		b.ReportMetric(float64(usec1-usec0)/float64(b.N), "server-µs/poll")
	})
	b.Run("memory", func(b *testing.B) {
		s := memory.New(clock.NewManual(time.UnixMilli(1_000_000)))
		for i := range listingJobs {
			st := protocol.JobStub{ID: "done-" + strconv.Itoa(i), Kind: protocol.KindGenerate, Owner: "alice", Site: "SITE",
				Audience: protocol.AudiencePublic, SizeClass: "small", DeadlineAt: 1_000_000 + 24*time.Hour.Milliseconds()}
			if _, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: st}); err != nil {
				b.Fatal(err)
			}
		}
		finishAll(b, s, listingResultBytes)
		b.ResetTimer()
		for range b.N {
			if _, err := s.Results(ctx, testSite); err != nil {
				b.Fatal(err)
			}
		}
	})
}
