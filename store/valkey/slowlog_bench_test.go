package valkey

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/store"
)

// The shape issue 12's "Done when" names: 500 finished jobs of 1 MiB
// results for one site, and no script call over 50 ms while it is polled.
const (
	slowlogJobs        = 500
	slowlogResultBytes = 1 << 20
	slowlogLimitUsec   = 50_000
	slowlogClaimers    = 4
	slowlogClaimMax    = 2
)

// slowEntry is one SLOWLOG GET entry: its id, duration and the command's
// first arguments (never the bodies, which may be envelopes).
type slowEntry struct {
	id   int64
	usec int64
	head string
}

// BenchmarkSlowlogLargeResults runs a site's results polls over 500
// finished jobs of 1 MiB results (a first poll, an unchanged one, one
// after one more job finished), with a few claims racing the first, and
// fails if the server's SLOWLOG holds any call over 50 ms. It reports the
// largest SLOWLOG duration, the entries and each poll's latency.
// Run with -benchtime=1x.
func BenchmarkSlowlogLargeResults(b *testing.B) {
	ctx := context.Background()
	s, client := benchStore(b)
	fill(b, s, "done", "alice", 0, slowlogJobs)
	finishAll(b, s, slowlogResultBytes)
	fill(b, s, "grab", "alice", 0, slowlogClaimers*slowlogClaimMax)
	for _, cmd := range []valkey.Completed{
		client.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", strconv.Itoa(slowlogLimitUsec)).Build(),
		client.B().ConfigSet().ParameterValue().ParameterValue("slowlog-max-len", "128").Build(),
	} {
		if err := client.Do(ctx, cmd).Error(); err != nil {
			b.Fatal(err)
		}
	}
	proveSlowlog(b, client)
	if err := client.Do(ctx, client.B().ConfigResetstat().Build()).Error(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		first := timedPoll(b, s, client, slowlogJobs, func() { claimRace(b, s) })
		unchanged := timedPoll(b, s, client, slowlogJobs, nil)
		fill(b, s, "late", "alice", 0, 1)
		finishAll(b, s, slowlogResultBytes)
		after := timedPoll(b, s, client, slowlogJobs+1, nil)
		for _, p := range []struct {
			name string
			poll pollCost
		}{{"first", first}, {"unchanged", unchanged}, {"after-one", after}} {
			b.ReportMetric(float64(p.poll.took.Microseconds()), p.name+"-poll-µs")
			b.ReportMetric(float64(p.poll.scriptUsec), p.name+"-poll-server-µs")
			b.ReportMetric(float64(p.poll.sent)/(1<<20), p.name+"-poll-sent-MiB")
			// Logged too: a failed benchmark prints no metrics.
			b.Logf("%s poll: %v, server scripts %d µs, sent %.1f MiB", p.name, p.poll.took, p.poll.scriptUsec, float64(p.poll.sent)/(1<<20))
		}
	}
	b.StopTimer()
	entries := slowlog(b, client, scriptNames(s))
	var largest int64
	for _, e := range entries {
		largest = max(largest, e.usec)
	}
	perCall := serverUsecPerCall(b, client, "fcall")
	b.ReportMetric(float64(largest), "slowlog-max-µs")
	b.ReportMetric(float64(len(entries)), "slowlog-entries")
	b.ReportMetric(perCall, "fcall-mean-µs")
	b.Logf("slowlog: %d entries over %d µs, largest %d µs; FCALL mean %.0f µs", len(entries), slowlogLimitUsec, largest, perCall)
	for _, e := range entries {
		if e.usec > slowlogLimitUsec {
			b.Errorf("slowlog entry %d: %d µs: %s", e.id, e.usec, e.head)
		}
	}
	if b.Failed() {
		b.Fatalf("a call took over %d µs", slowlogLimitUsec)
	}
}

// proveSlowlog runs one script of about 60 ms and checks SLOWLOG caught
// it, so an empty log later means no call was slow, then empties the log.
func proveSlowlog(b *testing.B, c valkey.Client) {
	b.Helper()
	ctx := context.Background()
	const spin = `local t0 = redis.call('TIME')
local start = t0[1] * 1000000 + t0[2]
repeat
  local t = redis.call('TIME')
until t[1] * 1000000 + t[2] - start > 60000
return 1`
	if err := c.Do(ctx, c.B().Eval().Script(spin).Numkeys(0).Build()).Error(); err != nil {
		b.Fatal(err)
	}
	if n, err := c.Do(ctx, c.B().SlowlogLen().Build()).AsInt64(); err != nil || n == 0 {
		b.Fatalf("SLOWLOG missed a 60 ms script: len %d, err %v", n, err)
	}
	if err := c.Do(ctx, c.B().SlowlogReset().Build()).Error(); err != nil {
		b.Fatal(err)
	}
}

// pollCost is what one results poll cost: its latency, the server's
// script time and the bytes the server sent while it ran.
type pollCost struct {
	took       time.Duration
	scriptUsec int64
	sent       int64
}

// timedPoll reads the site's results listing (every page) while during,
// if any, runs alongside, and returns what the listing cost (the server
// figures include during's calls).
func timedPoll(b *testing.B, s *Store, c valkey.Client, want int, during func()) pollCost {
	b.Helper()
	sent0, usec0 := serverCounters(b, c)
	var wg sync.WaitGroup
	if during != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			during()
		}()
	}
	start := time.Now()
	got, err := s.Results(context.Background(), testSite)
	took := time.Since(start)
	wg.Wait()
	if err != nil || len(got) != want {
		b.Fatalf("results poll: %d jobs (want %d), err %v", len(got), want, err)
	}
	sent1, usec1 := serverCounters(b, c)
	return pollCost{took: took, scriptUsec: usec1 - usec0, sent: sent1 - sent0}
}

// claimRace makes a few runners claim at once, each taking up to
// slowlogClaimMax of the pending jobs.
func claimRace(b *testing.B, s store.RoutingStore) {
	var wg sync.WaitGroup
	for r := range slowlogClaimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Claim(context.Background(), claimInput("racer-"+strconv.Itoa(r), slowlogClaimMax)); err != nil {
				b.Errorf("claim: %v", err)
			}
		}()
	}
	wg.Wait()
}

// scriptNames maps each script's function, as FCALL names it, to its
// operation, so a slow entry says which script it was.
func scriptNames(s *Store) map[string]string {
	names := make(map[string]string, len(s.scripts))
	for op, sc := range s.scripts {
		names[sc.function()] = string(op)
	}
	return names
}

// slowlog reads SLOWLOG GET 128, keeping of each command its name and
// first short arguments only, a script's SHA1 replaced by its operation.
func slowlog(b *testing.B, c valkey.Client, names map[string]string) []slowEntry {
	b.Helper()
	raw, err := c.Do(context.Background(), c.B().SlowlogGet().Count(128).Build()).ToArray()
	if err != nil {
		b.Fatal(err)
	}
	out := make([]slowEntry, 0, len(raw))
	for _, m := range raw {
		f, err := m.ToArray()
		if err != nil || len(f) < 4 {
			b.Fatalf("malformed slowlog entry: %v", err)
		}
		id, _ := f[0].AsInt64()
		usec, _ := f[2].AsInt64()
		args, _ := f[3].AsStrSlice()
		if len(args) > 1 && names[args[1]] != "" {
			args[1] = "script:" + names[args[1]]
		}
		out = append(out, slowEntry{id: id, usec: usec, head: commandHead(args)})
	}
	return out
}

// commandHead names a command by its first three arguments, each cut
// short, so a script's sha and key show but no body does.
func commandHead(args []string) string {
	parts := make([]string, 0, 4)
	for i, a := range args {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("(+%d args)", len(args)-3))
			break
		}
		if len(a) > 48 {
			a = a[:48] + "…"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}
