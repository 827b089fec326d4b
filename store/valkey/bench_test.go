package valkey

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// Benchmarks run against a real server (see internal/valkeytest) with the
// store clock pinned, so nothing falls due while they run. docs/performance.md
// has the figures and how to reproduce them.

func benchStore(b *testing.B) (*Store, valkey.Client) {
	b.Helper()
	srv := valkeytest.Start(b)
	client := srv.Client(b)
	s := newTestStore(b, client)
	pinClock(b, s)
	return s, client
}

// fill enqueues n jobs through the real enqueue script, pipelined, ids
// tag-0..tag-(n-1), owned by owner.
func fill(b testing.TB, s *Store, tag, owner string, from, to int) {
	b.Helper()
	fillProto(b, s, store.Proto0, tag, owner, from, to)
}

// fillProto is fill for jobs of a protocol (proto-2 ones for a team).
func fillProto(b testing.TB, s *Store, p store.Proto, tag, owner string, from, to int) {
	b.Helper()
	audience := protocol.AudiencePublic
	if p == store.Proto2 {
		audience = "team"
	}
	ctx := context.Background()
	now, err := s.Now(ctx)
	if err != nil {
		b.Fatal(err)
	}
	const chunk = 5000
	for lo := from; lo < to; lo += chunk {
		hi := min(lo+chunk, to)
		execs := make([]valkey.LuaExec, 0, hi-lo)
		for i := lo; i < hi; i++ {
			st := protocol.JobStub{ID: tag + "-" + strconv.Itoa(i), Kind: protocol.KindGenerate, Owner: owner, Site: "SITE",
				Audience: audience, SizeClass: "small", DeadlineAt: now + 24*time.Hour.Milliseconds()}
			c, err := enqueueCall(s, store.EnqueueInput{SiteID: testSite, Proto: p, Stub: st})
			if err != nil {
				b.Fatal(err)
			}
			execs = append(execs, valkey.LuaExec{Keys: c.keys, Args: c.args})
		}
		for _, r := range s.scripts[store.OpEnqueue].run.(*fcall).ExecMulti(ctx, s.client, execs...) {
			if err := r.Error(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func usedMemory(b *testing.B, c valkey.Client) int64 {
	b.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no used_memory in INFO")
	return 0
}

// BenchmarkClaimWithQueued measures one claim while 1k to 1M jobs sit
// queued for an owner nobody serves: "grant" claims one job of the served
// owner, "empty" finds nothing. Both must stay flat as the backlog grows.
// It also reports the memory each queued job takes (INFO used_memory).
func BenchmarkClaimWithQueued(b *testing.B) {
	s, client := benchStore(b)
	have := 0
	for _, n := range []int{1_000, 10_000, 100_000, 1_000_000} {
		before := usedMemory(b, client)
		fill(b, s, "idle", "nobody", have, n)
		perJob := float64(usedMemory(b, client)-before) / float64(n-have)
		have = n
		name := strconv.Itoa(n/1000) + "k"
		if n >= 1_000_000 {
			name = strconv.Itoa(n/1_000_000) + "M"
		}
		b.Run("queued="+name+"/grant", func(b *testing.B) {
			fill(b, s, "work-"+name+"-"+strconv.Itoa(b.N), "alice", 0, b.N)
			in := claimInput("r1", 1)
			in.Routes = []store.Route{{SiteID: testSite, Owner: "alice"}}
			b.ResetTimer()
			for range b.N {
				got, err := s.Claim(context.Background(), in)
				if err != nil || len(got) != 1 {
					b.Fatalf("claim: %v %d", err, len(got))
				}
			}
			b.StopTimer()
			b.ReportMetric(perJob, "B/queued-job")
		})
		b.Run("queued="+name+"/empty", func(b *testing.B) {
			in := claimInput("r1", 64)
			in.Routes = []store.Route{{SiteID: testSite, Owner: "dave"}}
			for range b.N {
				got, err := s.Claim(context.Background(), in)
				if err != nil || len(got) != 0 {
					b.Fatalf("claim: %v %d", err, len(got))
				}
			}
		})
	}
	for _, k := range []string{"job", "order", "deadline", "queue"} {
		n, err := client.Do(context.Background(), client.B().MemoryUsage().Key(s.key(k)).Samples(0).Build()).AsInt64()
		if err == nil {
			b.Logf("MEMORY USAGE %s (1M+ jobs): %d bytes, %.0f B/job", k, n, float64(n)/float64(have))
		}
	}
}

// claimedN enqueues and claims n jobs for r1, returning the grants. The
// jobs belong to an owner of their own, so earlier rounds do not interfere.
func claimedN(b *testing.B, s *Store, tag string, n int) []protocol.ClaimedStub {
	b.Helper()
	fill(b, s, tag, "owner-"+tag, 0, n)
	in := claimInput("r1", protocol.MaxClaim)
	in.Owner = "owner-" + tag
	in.Routes = []store.Route{{SiteID: testSite, Owner: "owner-" + tag}}
	var out []protocol.ClaimedStub
	for len(out) < n {
		got, err := s.Claim(context.Background(), in)
		if err != nil || len(got) == 0 {
			b.Fatalf("claim: %v", err)
		}
		out = append(out, got...)
	}
	return out
}

func sealAll(b *testing.B, s *Store, cs []protocol.ClaimedStub) {
	b.Helper()
	for _, c := range cs {
		if err := s.Payload(context.Background(), store.PayloadInput{JobID: c.ID, SiteID: testSite, Envelope: env("payload", c.ID)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOperations measures each operation once per iteration on an
// otherwise small store.
func BenchmarkOperations(b *testing.B) {
	s, _ := benchStore(b)
	ctx := context.Background()
	round := 0
	tag := func() string { round++; return "r" + strconv.Itoa(round) }

	b.Run("Now", func(b *testing.B) {
		for range b.N {
			if _, err := s.Now(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	benchJobLifecycle(ctx, b, s, tag)
	benchLeaseEnds(ctx, b, s, tag)
	benchRunnersAndSweep(ctx, b, s)
	benchReads(ctx, b, s)
}

// benchJobLifecycle measures a job's way from enqueue to result: the
// site's writes and the runner's claim, fetch and result.
func benchJobLifecycle(ctx context.Context, b *testing.B, s *Store, tag func() string) {
	b.Run("Enqueue", func(b *testing.B) {
		t := tag()
		now, _ := s.Now(ctx)
		for i := range b.N {
			st := protocol.JobStub{ID: t + "-" + strconv.Itoa(i), Kind: protocol.KindGenerate, Owner: "erin", Site: "SITE",
				Audience: protocol.AudiencePublic, SizeClass: "small", DeadlineAt: now + time.Hour.Milliseconds()}
			if _, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: st}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Claim64", func(b *testing.B) {
		fill(b, s, tag(), "frank", 0, b.N*64)
		in := claimInput("r1", 64)
		in.Routes = []store.Route{{SiteID: testSite, Owner: "frank"}}
		b.ResetTimer()
		for range b.N {
			if got, err := s.Claim(ctx, in); err != nil || len(got) != 64 {
				b.Fatalf("claim: %v", err)
			}
		}
	})
	b.Run("Payload", func(b *testing.B) {
		cs := claimedN(b, s, tag(), b.N)
		b.ResetTimer()
		sealAll(b, s, cs[:b.N])
	})
	b.Run("Fetch", func(b *testing.B) {
		cs := claimedN(b, s, tag(), b.N)
		sealAll(b, s, cs)
		b.ResetTimer()
		for _, c := range cs[:b.N] {
			if _, err := s.Fetch(ctx, leaseOf(c)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Result", func(b *testing.B) {
		cs := claimedN(b, s, tag(), b.N)
		b.ResetTimer()
		for _, c := range cs[:b.N] {
			if _, err := s.Result(ctx, store.ResultInput{LeaseInput: leaseOf(c), Envelope: env("result", c.ID), Disposition: "ok"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchLeaseEnds measures the other ways a lease ends or goes on: release,
// renew, cancel and the runner's read of its cancel requests.
func benchLeaseEnds(ctx context.Context, b *testing.B, s *Store, tag func() string) {
	b.Run("Release", func(b *testing.B) {
		cs := claimedN(b, s, tag(), b.N)
		b.ResetTimer()
		for _, c := range cs[:b.N] {
			if _, err := s.Release(ctx, store.ReleaseInput{RunnerID: "r1", Leases: []protocol.LeaseRef{{JobID: c.ID, LeaseID: c.Lease.ID}}, Reason: "refused"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Renew", func(b *testing.B) {
		cs := claimedN(b, s, tag(), 8)
		var refs []protocol.LeaseRef
		for _, c := range cs {
			refs = append(refs, protocol.LeaseRef{JobID: c.ID, LeaseID: c.Lease.ID})
		}
		b.ResetTimer()
		for range b.N {
			if _, err := s.Renew(ctx, store.RenewInput{RunnerID: "r1", Leases: refs[:8], LeaseMs: 60_000}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Cancel", func(b *testing.B) {
		t := tag()
		fill(b, s, t, "gina", 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			if _, err := s.Cancel(ctx, store.CancelInput{JobID: t + "-" + strconv.Itoa(i), SiteID: testSite}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CancelRequests", func(b *testing.B) {
		for range b.N {
			if _, err := s.CancelRequests(ctx, store.CancelRequestsInput{RunnerID: "r1"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchRunnersAndSweep measures pairing, the presence touch and a sweep
// with nothing due.
func benchRunnersAndSweep(ctx context.Context, b *testing.B, s *Store) {
	b.Run("Pair", func(b *testing.B) {
		for i := range b.N {
			if _, err := s.Pair(ctx, store.PairInput{RunnerID: "runner-" + strconv.Itoa(i%1000), Owner: "alice", Device: testDevice}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Touch", func(b *testing.B) {
		for i := range b.N {
			if _, err := s.Touch(ctx, store.TouchInput{RunnerID: "runner-" + strconv.Itoa(i%1000)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Sweep/nothing-due", func(b *testing.B) {
		for range b.N {
			if _, err := s.Sweep(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchReads measures the reads: one job (r2-0, the first Claim64 filled),
// the listings and presence.
func benchReads(ctx context.Context, b *testing.B, s *Store) {
	b.Run("Job", func(b *testing.B) {
		for range b.N {
			if _, _, err := s.Job(ctx, testSite, "r2-0"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Jobs100", func(b *testing.B) {
		for range b.N {
			if _, err := s.Jobs(ctx, 100); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Pending", func(b *testing.B) {
		for range b.N {
			if _, err := s.Pending(ctx, "site-without-jobs"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Results", func(b *testing.B) {
		for range b.N {
			if _, err := s.Results(ctx, "site-without-jobs"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Presence", func(b *testing.B) {
		for range b.N {
			if _, _, err := s.Presence(ctx, "runner-1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Runners100", func(b *testing.B) {
		for range b.N {
			if _, err := s.Runners(ctx, 100); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkClaimPastRefused measures a claim that must step over jobs the
// runner refused (they stay queued for others) before it finds one to
// grant: the one case where a claim's work grows with what it skips.
func BenchmarkClaimPastRefused(b *testing.B) {
	for _, refused := range []int{10, 100, 1000, 10000} {
		b.Run("refused="+strconv.Itoa(refused), func(b *testing.B) {
			s, _ := benchStore(b)
			ctx := context.Background()
			cs := claimedN(b, s, "head", refused)
			var refs []protocol.LeaseRef
			for _, c := range cs {
				refs = append(refs, protocol.LeaseRef{JobID: c.ID, LeaseID: c.Lease.ID})
			}
			if _, err := s.Release(ctx, store.ReleaseInput{RunnerID: "r1", Leases: refs, Reason: protocol.ReasonRefused}); err != nil {
				b.Fatal(err)
			}
			fill(b, s, "tail", "owner-head", 0, b.N)
			in := claimInput("r1", 1)
			in.Owner = "owner-head"
			in.Routes = []store.Route{{SiteID: testSite, Owner: "owner-head"}}
			b.ResetTimer()
			for range b.N {
				if got, err := s.Claim(ctx, in); err != nil || len(got) != 1 {
					b.Fatalf("claim: %v %d", err, len(got))
				}
			}
		})
	}
}

// BenchmarkSweepDue measures a sweep that finds a full batch of expired
// jobs, per job settled.
func BenchmarkSweepDue(b *testing.B) {
	s, _ := benchStore(b)
	ctx := context.Background()
	for i := range b.N {
		b.StopTimer()
		t := fmt.Sprintf("due%d", i)
		fill(b, s, t, "harry", 0, sweepBatch)
		advance(b, s, 25*time.Hour)
		b.StartTimer()
		res, err := s.Sweep(ctx)
		if err != nil || len(res.Expired) != sweepBatch {
			b.Fatalf("sweep: %v %d", err, len(res.Expired))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*sweepBatch), "ns/job-settled")
}

// commandsRun sums INFO commandstats calls, the commands scripts run
// included, leaving out the INFO this sends.
func commandsRun(b *testing.B, c valkey.Client) int64 {
	b.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		total += n
	}
	return total
}

// BenchmarkBoundedEmptyClaim measures an empty claim by a roster owner
// (protocol "0": one route per roster member, two kinds) with 0 and 1,000
// members, while 10k jobs of an owner nobody serves sit queued: the
// commands it runs and its time must not grow with the empty routes.
func BenchmarkBoundedEmptyClaim(b *testing.B) {
	s, client := benchStore(b)
	fill(b, s, "idle", "nobody", 0, 10_000)
	// The background sweeper's first pass takes the census of the queues
	// that claims over the routes holding work rely on.
	if _, err := s.Sweep(context.Background()); err != nil {
		b.Fatal(err)
	}
	for _, members := range []int{0, 1000} {
		b.Run("roster="+strconv.Itoa(members), func(b *testing.B) {
			in := claimInput("r1", 64)
			in.Kinds = []string{protocol.KindGenerate, protocol.KindChat}
			for i := range members {
				in.Routes = append(in.Routes, store.Route{SiteID: testSite, Owner: "member-" + strconv.Itoa(i)})
			}
			st := &scriptTime{s: s}
			before := commandsRun(b, client)
			st.start(b)
			b.ResetTimer()
			for range b.N {
				if got, err := s.Claim(context.Background(), in); err != nil || len(got) != 0 {
					b.Fatalf("claim: %v %d", err, len(got))
				}
			}
			b.StopTimer()
			st.stop(b)
			st.report(b, b.N, "", 0)
			b.ReportMetric(float64(commandsRun(b, client)-before-1)/float64(b.N), "commands/claim")
		})
	}
}

// scriptDurations reads the server time of every call of op's script that
// SLOWLOG kept since startSlowlog, in µs, sorted.
func scriptDurations(b *testing.B, s *Store, op store.Op) []int64 {
	b.Helper()
	name := s.scripts[op].function()
	entries, err := s.client.Do(context.Background(), s.client.B().SlowlogGet().Count(-1).Build()).ToArray()
	if err != nil {
		b.Fatal(err)
	}
	var out []int64
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 4 {
			b.Fatal("malformed SLOWLOG entry")
		}
		args, _ := f[3].AsStrSlice()
		if len(args) > 1 && strings.EqualFold(args[0], "fcall") && args[1] == name {
			us, _ := f[2].AsInt64()
			out = append(out, us)
		}
	}
	slices.Sort(out)
	return out
}

// startSlowlog makes SLOWLOG keep every command from now on.
func startSlowlog(b *testing.B, c valkey.Client) {
	b.Helper()
	ctx := context.Background()
	for _, cmd := range []valkey.Completed{
		c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "0").ParameterValue("slowlog-max-len", "1000000").Build(),
		c.B().SlowlogReset().Build(),
	} {
		if err := c.Do(ctx, cmd).Error(); err != nil {
			b.Fatal(err)
		}
	}
}

// p99 reads the 99th percentile of sorted figures.
func p99[T any](sorted []T) T { return sorted[len(sorted)*99/100] }

// BenchmarkBoundedDrain drains 200,000 expired jobs (20,000 with -short)
// queued where claims look, by one sweeper calling Sweep while it reports
// work, as the server's sweeper does during a backlog, while one daemon
// claims in a loop. It reports the sweeper's expiries per second and the
// claims' p50, p99 and worst latency seen by the client; run again with
// SLOWLOG keeping every command, it reports the server time of the claim
// and the sweep scripts too (a claim waits at most one sweep call on the
// server). Keeping every command in SLOWLOG costs Valkey time of its own,
// so the client figures of that run carry it. Run it with -benchtime=1x.
func BenchmarkBoundedDrain(b *testing.B) {
	backlog := 200_000
	if testing.Short() {
		backlog = 20_000
	}
	for _, slowlog := range []bool{false, true} {
		b.Run("slowlog="+strconv.FormatBool(slowlog), func(b *testing.B) { benchBoundedDrain(b, backlog, slowlog) })
	}
}

func benchBoundedDrain(b *testing.B, backlog int, slowlog bool) {
	for range b.N {
		s, client := benchStore(b)
		fill(b, s, "old", "alice", 0, backlog)
		advance(b, s, 25*time.Hour)
		if slowlog {
			startSlowlog(b, client)
		}
		ctx, stop := context.WithCancel(context.Background())
		latencies := make(chan []time.Duration)
		go func() {
			var ds []time.Duration
			for ctx.Err() == nil {
				at := time.Now()
				if _, err := s.Claim(ctx, claimInput("r1", 1)); err != nil && ctx.Err() == nil {
					b.Error(err)
				}
				ds = append(ds, time.Since(at))
			}
			latencies <- ds
		}()
		start := time.Now()
		swept := 0
		for {
			res, err := s.Sweep(ctx)
			if err != nil {
				b.Fatal(err)
			}
			swept += len(res.Expired)
			if len(res.Expired)+len(res.Requeued) == 0 {
				break
			}
		}
		elapsed := time.Since(start)
		stop()
		ds := <-latencies
		slices.Sort(ds)
		b.ReportMetric(float64(swept)/elapsed.Seconds(), "sweeper-expiries/s")
		b.ReportMetric(float64(backlog)/elapsed.Seconds(), "all-expiries/s")
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "claim-p50-ms")
		b.ReportMetric(float64(p99(ds).Microseconds())/1000, "claim-p99-ms")
		b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, "claim-max-ms")
		b.ReportMetric(float64(len(ds)), "claims")
		if slowlog {
			claims, sweeps := scriptDurations(b, s, store.OpClaim), scriptDurations(b, s, store.OpSweep)
			b.ReportMetric(float64(p99(claims))/1000, "claim-server-p99-ms")
			b.ReportMetric(float64(p99(sweeps))/1000, "sweep-server-p99-ms")
		}
	}
}
