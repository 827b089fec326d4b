package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/valkey"
)

// drainWatch passes sweeps through to the store and counts its calls, what
// they settled and the time spent in them.
type drainWatch struct {
	store.RoutingStore
	mu    sync.Mutex
	swept int
	calls int
	busy  time.Duration
}

func (w *drainWatch) Sweep(ctx context.Context) (store.SweepResult, error) {
	at := time.Now()
	res, err := w.RoutingStore.Sweep(ctx)
	if err != nil {
		return res, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy += time.Since(at)
	w.calls++
	w.swept += len(res.Requeued) + len(res.Expired)
	return res, nil
}

func (w *drainWatch) progress() (swept, calls int, busy time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.swept, w.calls, w.busy
}

// fillExpired enqueues n jobs of alice whose deadlines passed an hour ago,
// many at a time so valkey-go pipelines them.
func fillExpired(b *testing.B, s *valkey.Store, n int) {
	b.Helper()
	ctx := context.Background()
	now, err := s.Now(ctx)
	if err != nil {
		b.Fatal(err)
	}
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				st := protocol.JobStub{ID: fmt.Sprintf("j%06d", i), Kind: protocol.KindGenerate, Owner: "alice", Site: "SITE",
					Audience: protocol.AudiencePublic, SizeClass: "small", DeadlineAt: now - time.Hour.Milliseconds()}
				if _, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: "site", Stub: st}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSweeperDrain drains 200,000 expired jobs (20,000 with -short)
// through the server's own sweeper on its default interval of 5 s, sliced
// as the server runs it, while one daemon claims in a loop: where the jobs
// are queued (its claims settle their share of the backlog), or on a route
// that holds nothing (its claims only wait behind the sweeps). It reports
// the sweeper's expiries per second of the drain and per second spent in
// Sweep (its pace), all expiries per second, and the claims' latency seen
// by the client during the drain. Run it with -benchtime=1x.
func BenchmarkSweeperDrain(b *testing.B) {
	backlog := 200_000
	if testing.Short() {
		backlog = 20_000
	}
	for _, claimer := range []struct{ name, owner string }{{"where-queued", "alice"}, {"elsewhere", "bob"}} {
		b.Run("claimer="+claimer.name, func(b *testing.B) { benchDrain(b, backlog, claimer.owner) })
	}
}

func benchDrain(b *testing.B, backlog int, claimOwner string) {
	for range b.N {
		srv := valkeytest.Start(b)
		s, err := valkey.NewFromClient(srv.Client(b), valkeytest.Prefix(b))
		if err != nil {
			b.Fatal(err)
		}
		fillExpired(b, s, backlog)
		watch := &drainWatch{RoutingStore: s}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { sweepEvery(ctx, watch, 5*time.Second, clock.System{}, quietLogger()) })
		// The first tick comes one interval in: time the drain, and claim,
		// from the first sweep, as on a replica up for a while.
		for _, calls, _ := watch.progress(); calls == 0; _, calls, _ = watch.progress() {
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		var latencies []time.Duration
		wg.Go(func() { latencies = claimUntilDrained(ctx, b, s, claimOwner) })
		for !drained(b, s) {
			time.Sleep(20 * time.Millisecond)
		}
		elapsed := time.Since(start)
		stop()
		wg.Wait()
		swept, calls, busy := watch.progress()
		slices.Sort(latencies)
		b.ReportMetric(float64(swept)/elapsed.Seconds(), "sweeper-expiries/s")
		b.ReportMetric(float64(swept)/busy.Seconds(), "sweeper-pace/s")
		b.ReportMetric(busy.Seconds()/elapsed.Seconds(), "sweeper-busy-share")
		b.ReportMetric(float64(calls), "sweeps")
		b.ReportMetric(float64(backlog)/elapsed.Seconds(), "all-expiries/s")
		b.ReportMetric(ms(latencies[len(latencies)/2]), "claim-p50-ms")
		b.ReportMetric(ms(latencies[len(latencies)*99/100]), "claim-p99-ms")
		b.ReportMetric(ms(latencies[len(latencies)-1]), "claim-max-ms")
		b.ReportMetric(float64(len(latencies)), "claims")
		b.ReportMetric(elapsed.Seconds(), "drain-s")
	}
}

// claimUntilDrained claims the jobs of owner in a loop until ctx ends, and
// returns each claim's latency.
func claimUntilDrained(ctx context.Context, b *testing.B, s *valkey.Store, owner string) []time.Duration {
	in := store.ClaimInput{RunnerID: "r1", Owner: owner, Device: protocol.PublicIdentity{Identity: "dGhlIHRlc3QgZGV2aWNlJ3MgaWRlbnRpdHkga2V5IQ", Encryption: "enc", EncryptionSig: "sig"}, Routes: []store.Route{{SiteID: "site", Owner: owner}},
		Kinds: []string{protocol.KindGenerate}, Max: 1, LeaseMs: 30_000}
	var ds []time.Duration
	for ctx.Err() == nil {
		at := time.Now()
		if _, err := s.Claim(ctx, in); err != nil && ctx.Err() == nil {
			b.Error(err)
			return ds
		}
		if ctx.Err() == nil {
			ds = append(ds, time.Since(at))
		}
	}
	return ds
}

// drained reports whether the store holds no job any more.
func drained(b *testing.B, s *valkey.Store) bool {
	jobs, err := s.Jobs(context.Background(), 1)
	if err != nil {
		b.Fatal(err)
	}
	return len(jobs) == 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
