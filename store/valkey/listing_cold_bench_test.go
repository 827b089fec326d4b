package valkey

import (
	"context"
	flagpkg "flag"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// coldJobs sizes BenchmarkResultsCold: the busy site is 100,000
// finished 1 KiB results (-cold.jobs=100000); the default keeps a plain
// benchmark run short.
var (
	coldJobs    = flagpkg.Int("cold.jobs", 3000, "finished 1 KiB results BenchmarkResultsCold lists")
	coldTimeout = flagpkg.Duration("cold.timeout", 2*time.Second, "the store timeout BenchmarkResultsCold polls under")
	coldCache   = flagpkg.Int64("cold.cache", DefaultResultsCacheBytes, "the results cache of BenchmarkResultsCold's replica")
)

// finishConcurrently is finishAll with the payload, fetch and result of
// each claimed job sent by several goroutines at once, so that valkey-go
// pipelines them: filling 100,000 jobs one round trip at a time takes
// minutes.
func finishConcurrently(b testing.TB, s *Store, size int) {
	b.Helper()
	ctx := context.Background()
	const workers = 16
	for {
		got, err := s.Claim(ctx, claimInput("r1", protocol.MaxClaim))
		if err != nil {
			b.Fatal(err)
		}
		if len(got) == 0 {
			return
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(got))
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(got); i += workers {
					errs <- finishClaimed(ctx, s, got[i], size)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

func finishClaimed(ctx context.Context, s *Store, c protocol.ClaimedStub, size int) error {
	lease := store.LeaseInput{SiteID: testSite, JobID: c.ID, RunnerID: c.Lease.RunnerID, LeaseID: c.Lease.ID}
	if err := s.Payload(ctx, store.PayloadInput{JobID: c.ID, SiteID: testSite, Envelope: env(protocol.DirectionPayload, c.ID)}); err != nil {
		return err
	}
	if _, err := s.Fetch(ctx, lease); err != nil {
		return err
	}
	e := env(protocol.DirectionResult, c.ID)
	e.Ciphertext += strings.Repeat("x", max(0, size-len(e.Ciphertext)))
	_, err := s.Result(ctx, store.ResultInput{LeaseInput: lease, Envelope: e, Disposition: "ok"})
	return err
}

// coldPoll polls r's listing of testSite under timeout until it answers,
// reporting the polls it took; it gives up after 20.
func coldPoll(b *testing.B, r *Store, timeout time.Duration, want int) int {
	b.Helper()
	for poll := 1; poll <= 20; poll++ {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		got, err := r.Results(ctx, testSite)
		cancel()
		if err == nil {
			if len(got) != want {
				b.Fatalf("listing of %d jobs, want %d", len(got), want)
			}
			return poll
		}
	}
	b.Fatalf("no answer in 20 polls of %v", timeout)
	return 0
}

// polledBytes reports what the server sent while poll ran, less the
// INFO replies that measure it.
func polledBytes(b *testing.B, c valkey.Client, poll func()) int64 {
	b.Helper()
	a, _ := serverCounters(b, c)
	m, _ := serverCounters(b, c)
	poll()
	z, _ := serverCounters(b, c)
	return (z - m) - (m - a)
}

// BenchmarkResultsCold measures the busy site (-cold.jobs=100000
// finished 1 KiB results): a replica started after they finished (a fresh
// Store, its cache empty) polls under -cold.timeout, the store timeout,
// until it answers; then an unchanged poll, and a poll after one more
// result. It reports the polls the cold replica needed, the bytes Valkey
// sent for the two warm polls, and their times (with a cache smaller than
// the listing, -cold.cache, the unchanged poll may take several polls too).
func BenchmarkResultsCold(b *testing.B) {
	s, client := benchStore(b)
	fill(b, s, "done", "alice", 0, *coldJobs)
	finishConcurrently(b, s, listingResultBytes)
	b.ResetTimer()
	var polls, coldNs, samePolls, sameBytes, sameNs, newBytes, newNs float64
	for i := range b.N {
		r, err := NewFromClientForTest(client, s.prefix)
		if err != nil {
			b.Fatal(err)
		}
		r.results = newResultsCache(*coldCache)
		start := time.Now()
		polls += float64(coldPoll(b, r, *coldTimeout, *coldJobs+i))
		coldNs += float64(time.Since(start))

		start = time.Now()
		sameBytes += float64(polledBytes(b, client, func() { samePolls += float64(coldPoll(b, r, *coldTimeout, *coldJobs+i)) }))
		sameNs += float64(time.Since(start))

		b.StopTimer()
		fill(b, s, "new"+strconv.Itoa(i), "alice", 0, 1)
		finishConcurrently(b, s, listingResultBytes)
		b.StartTimer()
		start = time.Now()
		newBytes += float64(polledBytes(b, client, func() { coldPoll(b, r, *coldTimeout, *coldJobs+i+1) }))
		newNs += float64(time.Since(start))
	}
	n := float64(b.N)
	b.ReportMetric(polls/n, "cold-polls")
	b.ReportMetric(coldNs/n/1e6, "cold-ms")
	b.ReportMetric(samePolls/n, "unchanged-polls")
	b.ReportMetric(sameBytes/n, "unchanged-valkey-B")
	b.ReportMetric(sameNs/n/1e6, "unchanged-ms")
	b.ReportMetric(newBytes/n, "one-new-valkey-B")
	b.ReportMetric(newNs/n/1e6, "one-new-ms")
}
