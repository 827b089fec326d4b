package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	vk "github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/backend"
)

// Saturation is the Valkey store's own throughput: many workers calling
// the store directly, each routing jobs through the store operations a
// relay runs per job, with no HTTP, signatures or sealing in the way.
type Saturation struct {
	Workers      int     `json:"workers"`
	Seconds      float64 `json:"seconds"`
	Jobs         int64   `json:"jobs"`
	Ops          int64   `json:"ops"`
	OpsPerSecond float64 `json:"opsPerSecond"`
	// OpsPerJob is the fixed mix each job takes (see perJobOps).
	OpsPerJob int `json:"opsPerJob"`
	// ValkeyCPUPerOp is the server's CPU time per operation, in µs.
	ValkeyCPUPerOp float64 `json:"valkeyCpuPerOpMicros"`
	// TrivialPerSecond is EVALSHA of a trivial script through the same
	// client, with as many workers for as long: the limit with the same
	// pipelining the store gets, where redis-benchmark sends one command
	// per round trip per connection.
	TrivialPerSecond float64 `json:"trivialEvalshaPerSecond"`
}

// perJobOps is what a relay asks of its store to route one job: enqueue;
// the claim, the fetch and the result, each stamping the runner's presence
// itself after the daemon plane's presence lookup; and the site's seal.
// The site's pending and results listings and the daemons' heartbeats are
// shared by many jobs and left out.
const perJobOps = 8

// Saturate runs workers concurrently against the Valkey server at addr for
// d and counts the operations done.
func Saturate(ctx context.Context, addr string, workers int, d time.Duration) (Saturation, error) {
	if workers < 1 {
		return Saturation{}, errors.New("saturate: at least one worker is needed")
	}
	prefix := fmt.Sprintf("saturate:{%d}:", time.Now().UnixNano())
	st, err := openValkey(ctx, addr, prefix)
	if err != nil {
		return Saturation{}, fmt.Errorf("saturate: %w", err)
	}
	defer st.Close()

	before, err := readValkeyStats(ctx, addr)
	if err != nil {
		return Saturation{}, err
	}
	var jobs atomic.Int64
	elapsed, err := runFor(ctx, workers, d, func(ctx context.Context, w int) error {
		return saturateWorker(ctx, st, "site-saturate", w, &jobs)
	})
	if err != nil {
		return Saturation{}, err
	}
	after, err := readValkeyStats(ctx, addr)
	if err != nil {
		return Saturation{}, err
	}
	n := jobs.Load()
	s := Saturation{Workers: workers, Seconds: elapsed.Seconds(), Jobs: n, Ops: n * perJobOps, OpsPerJob: perJobOps}
	s.OpsPerSecond = float64(s.Ops) / elapsed.Seconds()
	if s.Ops > 0 {
		s.ValkeyCPUPerOp = 1e6 * (after.cpuSeconds - before.cpuSeconds) / float64(s.Ops)
	}
	// The baseline goes through a client of its own, configured as the
	// store's is (no client-side cache), so the two figures compare.
	c, err := vk.NewClient(vk.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return Saturation{}, fmt.Errorf("saturate: baseline client: %w", err)
	}
	defer c.Close()
	if s.TrivialPerSecond, err = trivialScripts(ctx, c, workers, d); err != nil {
		return Saturation{}, err
	}
	return s, nil
}

// trivialScripts runs EVALSHA of "return 1" from workers goroutines for d
// and reports calls per second.
func trivialScripts(ctx context.Context, c vk.Client, workers int, d time.Duration) (float64, error) {
	script := vk.NewLuaScript("return 1")
	var calls atomic.Int64
	elapsed, err := runFor(ctx, workers, d, func(ctx context.Context, _ int) error {
		for ctx.Err() == nil {
			if err := script.Exec(ctx, c, nil, nil).Error(); err != nil {
				return fmt.Errorf("saturate: trivial script: %w", err)
			}
			calls.Add(1)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return float64(calls.Load()) / elapsed.Seconds(), nil
}

// runFor runs work on workers goroutines until d has passed, and reports
// how long they ran. The first error that is not the deadline's stops them
// all and is returned.
func runFor(ctx context.Context, workers int, d time.Duration, work func(ctx context.Context, worker int) error) (time.Duration, error) {
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	errs := make(chan error, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			if err := work(runCtx, w); err != nil && runCtx.Err() == nil {
				errs <- err
				cancel()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	return elapsed, <-errs
}

// saturateWorker routes protocol-"0" jobs of its own owner through siteID
// until ctx ends, counting the jobs whose every operation completed.
func saturateWorker(ctx context.Context, st store.RoutingStore, siteID string, w int, jobs *atomic.Int64) error {
	return saturateWorkerOf(ctx, st, store.Proto0, siteID, w, jobs)
}

// saturateWorkerOf is saturateWorker for either protocol. Protocol "0"
// reads the runner's presence before each daemon call, as its codec
// does; protocol "2" instead stamps it in each call's admission, as its
// codec does (the projection says who a runner is).
func saturateWorkerOf(ctx context.Context, st store.RoutingStore, p store.Proto, siteID string, w int, jobs *atomic.Int64) error {
	runner := "saturate-runner-" + strconv.Itoa(w)
	owner := "saturate-owner-" + strconv.Itoa(w)
	// The identity only needs to decode as a key: envelopes name its key id.
	identity := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%-32s", runner)))
	device := protocol.PublicIdentity{Identity: identity, Encryption: "enc-" + runner, EncryptionSig: "sig-" + runner}
	deviceKeyID, _ := protocol.KeyIDOf(identity)
	if _, err := st.Pair(ctx, store.PairInput{Proto: p, RunnerID: runner, Owner: owner, Device: device}); err != nil {
		return fmt.Errorf("saturate: seen: %w", err)
	}
	var admit *store.Admission
	audience := protocol.AudiencePublic
	if p == store.Proto2 {
		admit, audience = &store.Admission{Pair: &store.PairInput{Proto: p, Owner: owner, Device: device}}, "private"
	}
	ciphertext := make([]byte, 256)
	_, _ = rand.Read(ciphertext)
	envelope := func(dir string, deadline int64) protocol.SealedEnvelope {
		e := protocol.SealedEnvelope{Ciphertext: base64.StdEncoding.EncodeToString(ciphertext), RecipientKeyID: deviceKeyID,
			SenderKeyID: "site-key", Direction: dir, DeadlineAt: deadline}
		if dir == protocol.DirectionResult {
			e.RecipientKeyID, e.SenderKeyID = e.SenderKeyID, e.RecipientKeyID
		}
		return e
	}
	// The daemon plane's lookup before each of its calls.
	daemonAuth := func() error {
		if p == store.Proto2 {
			return nil
		}
		_, _, err := st.Presence(ctx, runner)
		return err
	}
	for i := 0; ; i++ {
		if ctx.Err() != nil {
			return nil
		}
		deadline := time.Now().Add(time.Minute).UnixMilli()
		id := owner + "-" + strconv.Itoa(i)
		stub := protocol.JobStub{ID: id, Kind: protocol.KindGenerate, Owner: owner, Site: "site-key", Audience: audience,
			SizeClass: "small", DeadlineAt: deadline}
		if _, err := st.Enqueue(ctx, store.EnqueueInput{SiteID: siteID, Proto: p, Stub: stub}); err != nil {
			return fmt.Errorf("saturate: enqueue: %w", err)
		}
		if err := daemonAuth(); err != nil {
			return fmt.Errorf("saturate: auth: %w", err)
		}
		granted, err := st.Claim(ctx, store.ClaimInput{Proto: p, RunnerID: runner, Owner: owner, Device: device,
			Routes: []store.Route{{SiteID: siteID, Owner: owner}}, Kinds: []string{protocol.KindGenerate}, Max: 1, LeaseMs: 30_000,
			Touch: admit == nil, Admit: admit})
		if err != nil {
			return fmt.Errorf("saturate: claim: %w", err)
		}
		if len(granted) != 1 || granted[0].ID != id {
			return fmt.Errorf("saturate: claim granted %d jobs, not %s", len(granted), id)
		}
		lease := store.LeaseInput{Proto: p, JobID: id, RunnerID: runner, LeaseID: granted[0].Lease.ID, Touch: admit == nil, Admit: admit}
		if err := st.Payload(ctx, store.PayloadInput{JobID: id, SiteID: siteID, Envelope: envelope(protocol.DirectionPayload, deadline)}); err != nil {
			return fmt.Errorf("saturate: seal: %w", err)
		}
		if err := daemonAuth(); err != nil {
			return fmt.Errorf("saturate: auth: %w", err)
		}
		if _, err := st.Fetch(ctx, lease); err != nil {
			return fmt.Errorf("saturate: take payload: %w", err)
		}
		if err := daemonAuth(); err != nil {
			return fmt.Errorf("saturate: auth: %w", err)
		}
		if _, err := st.Result(ctx, store.ResultInput{LeaseInput: lease, Envelope: envelope(protocol.DirectionResult, deadline),
			Disposition: "ok"}); err != nil {
			return fmt.Errorf("saturate: complete: %w", err)
		}
		jobs.Add(1)
	}
}

// openValkey opens the Valkey store at addr under prefix the way relayd
// does, through the one place that chooses and opens a store.
func openValkey(ctx context.Context, addr, prefix string) (store.RoutingStore, error) {
	b, err := backend.Open(ctx, backend.Options{Kind: backend.Valkey, Valkey: backend.ValkeyOptions{Addrs: []string{addr}, Prefix: prefix}})
	return b.Store, err
}
