package valkey

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// scriptTime accumulates the server's own time in scripts (INFO
// commandstats), which the benchmarks below also report: on a
// shared machine it is far steadier than the client's wall clock.
type scriptTime struct {
	s            *Store
	calls, usec  int64
	atCalls, atU int64
}

func (st *scriptTime) read(b *testing.B) (calls, usec int64) {
	b.Helper()
	info, err := st.s.client.Do(context.Background(), st.s.client.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	return scriptStats(info)
}

// scriptCommands are the commands that run the store's scripts: FCALL
// since the scripts became a library (functions.go), EVALSHA before.
var scriptCommands = []string{"cmdstat_fcall:", "cmdstat_fcall_ro:", "cmdstat_evalsha:", "cmdstat_evalsha_ro:", "cmdstat_eval:", "cmdstat_eval_ro:"}

// scriptStats sums the calls and server time of every script command in
// an INFO reply.
func scriptStats(info string) (calls, usec int64) {
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		for _, cmd := range scriptCommands {
			rest, ok := strings.CutPrefix(line, cmd)
			if !ok {
				continue
			}
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "calls":
					calls += n
				case "usec":
					usec += n
				}
			}
		}
	}
	return calls, usec
}

func (st *scriptTime) start(b *testing.B) { st.atCalls, st.atU = st.read(b) }

func (st *scriptTime) stop(b *testing.B) {
	c, u := st.read(b)
	st.calls += c - st.atCalls
	st.usec += u - st.atU
}

// report gives the server's script time per operation, and per unit when
// units (such as jobs settled) is set.
func (st *scriptTime) report(b *testing.B, ops int, unit string, units int) {
	b.ReportMetric(float64(st.usec)/float64(ops), "server-µs/op")
	if units > 0 {
		b.ReportMetric(float64(st.usec)*1000/float64(units), "server-ns/"+unit)
	}
}

// timed runs body b.N times with the timer and the script clock on.
func timed(b *testing.B, s *Store, body func(i int)) {
	b.Helper()
	st := &scriptTime{s: s}
	b.ResetTimer()
	st.start(b)
	for i := range b.N {
		body(i)
	}
	st.stop(b)
	b.StopTimer()
	st.report(b, b.N, "", 0)
}

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
			timed(b, s, func(i int) {
				in := leaseOf(cs[i])
				if _, err := s.Fetch(ctx, in); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(name+"/fetch-lease-first/proto2", func(b *testing.B) {
			cs := claimedSealed2(b, s, tag(), b.N)
			timed(b, s, func(i int) {
				in := leaseOf(cs[i])
				in.Proto, in.SiteID = store.Proto2, ""
				if _, err := s.Fetch(ctx, in); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(name+"/sweep-lapsing/proto0", func(b *testing.B) { sweepLapsing(b, s, store.Proto0, tag) })
		b.Run(name+"/sweep-lapsing/proto2", func(b *testing.B) { sweepLapsing(b, s, store.Proto2, tag) })
	}
}

func claimLoop(b *testing.B, s *Store, in store.ClaimInput, want int) {
	b.Helper()
	timed(b, s, func(int) {
		if got, err := s.Claim(context.Background(), in); err != nil || len(got) != want {
			b.Fatalf("claim: %v %d", err, len(got))
		}
	})
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
	st := &scriptTime{s: s}
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
		st.start(b)
		res, err := s.Sweep(ctx)
		st.stop(b)
		// Grants of the other benchmarks may fall due too: count them all.
		if err != nil || len(res.Requeued) < sweepBatch || (p == store.Proto2 && len(res.Lapsed) < sweepBatch) {
			b.Fatalf("sweep: %v %d %d", err, len(res.Requeued), len(res.Lapsed))
		}
		settled += len(res.Requeued) + len(res.Expired)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(settled), "ns/job-settled")
	st.report(b, b.N, "job-settled", settled)
}
