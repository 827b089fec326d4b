package valkey

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/valkey-io/valkey-go"
)

// BenchmarkRememberedAnswers makes b.N empty claims spread over 100
// runners, 100 at a time, then reports the Valkey memory the remembered
// answers hold: MEMORY USAGE summed over the answer keys (per-call "req:"
// keys before the memo, "memo:" strings, then "answers:" hashes; literals,
// so that the same file runs on the older revisions), the used_memory
// delta and the server's mean time per claim.
// docs/performance.md ("Remembered answers") has the figures; run with
// -benchtime=100000x.
func BenchmarkRememberedAnswers(b *testing.B) {
	s, client := benchStore(b)
	const runners = 100
	ctx := context.Background()
	before := usedMemory(b, client)
	if err := client.Do(ctx, client.B().ConfigResetstat().Build()).Error(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := claimInput("runner-"+strconv.Itoa(r), 8)
			for i := r; i < b.N; i += runners {
				if got, err := s.Claim(ctx, in); err != nil || len(got) != 0 {
					b.Errorf("claim: %v %d", err, len(got))
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	delta := usedMemory(b, client) - before
	keys, bytes := answerKeys(b, client, s.prefix)
	b.ReportMetric(float64(keys), "answer-keys")
	b.ReportMetric(float64(bytes), "answer-bytes")
	b.ReportMetric(float64(bytes)/float64(b.N), "answer-B/call")
	b.ReportMetric(float64(delta), "used_memory-delta")
	b.ReportMetric(serverUsecPerCall(b, client, "fcall"), "server-µs/claim")
}

// serverUsecPerCall reads a command's mean server time from INFO
// commandstats.
func serverUsecPerCall(b *testing.B, c valkey.Client, cmd string) float64 {
	b.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":"); ok {
			for _, f := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
					n, err := strconv.ParseFloat(v, 64)
					if err != nil {
						b.Fatal(err)
					}
					return n
				}
			}
		}
	}
	b.Fatalf("no %s in INFO commandstats", cmd)
	return 0
}

// answerKeys counts the keys holding remembered answers under prefix and
// sums their MEMORY USAGE.
func answerKeys(b *testing.B, c valkey.Client, prefix string) (n, bytes int64) {
	b.Helper()
	ctx := context.Background()
	for _, kind := range []string{"req:", "memo:", "answers:"} {
		var cursor uint64
		for {
			e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(globEscape(prefix+kind)+"*").Count(5000).Build()).AsScanEntry()
			if err != nil {
				b.Fatal(err)
			}
			cmds := make(valkey.Commands, 0, len(e.Elements))
			for _, k := range e.Elements {
				cmds = append(cmds, c.B().MemoryUsage().Key(k).Samples(0).Build())
			}
			for _, r := range c.DoMulti(ctx, cmds...) {
				v, err := r.AsInt64()
				if err != nil {
					b.Fatal(err)
				}
				n, bytes = n+1, bytes+v
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return n, bytes
}

// globEscape quotes the pattern characters of a key prefix (tests only).
func globEscape(s string) string {
	out := make([]byte, 0, len(s))
	for i := range len(s) {
		switch s[i] {
		case '*', '?', '[', ']', '{', '}', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}
