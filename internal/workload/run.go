// Package workload drives the full sealed lifecycle of many jobs through one
// or more relay replicas, with the Go test site and many test daemons, and
// records enough to judge the relay afterwards.
//
// It speaks protocol "0", protocol "2", or both at once (Config.Protocol):
// in a mixed run "0" and "2" sites and daemons share the relay, each
// owner's devices alternating between the two, and "2" jobs come from
// several sites under the same ids, as "2" keys jobs by (site, id).
//
// The site publishes jobs, seals each claimed job's payload to the device
// pending names, and collects and opens every result once. Each daemon
// claims and then takes each job through peer's shared Work, the lifecycle
// every Go daemon here follows, of either protocol: it polls fetch until the payload is sealed,
// opens it, "runs" it (an echo), seals the result back and posts it,
// heartbeating its leases
// throughout; some results are deliberately posted twice, and some grants
// can be abandoned as a crashing daemon would. Every request goes through a
// balancer that spreads requests over the replicas and retries a transport
// failure or a 503 on the next one.
//
// Check then looks for what must never happen: a job granted twice under
// live leases, a job lost, a result collected twice or never, a replay not
// answered duplicate, a 5xx, a lease not stamped by the store's clock, a
// job of one protocol offered to a daemon of the other.
// Report gives counts, per-endpoint latency percentiles, errors by kind and
// throughput.
//
// The package imports no testing code, so a benchmark command can use it.
package workload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
)

// Run is one workload in progress or finished.
type Run struct {
	cfg   Config
	bal   *balancer
	http  *http.Client
	lanes []*lane
	// siteIDs maps each site's key id (a "2" stub's site) to its id.
	siteIDs map[string]string
	// protos is each running device's protocol, by index.
	protos  []string
	daemons []*daemon
	rec     *records
	st      *stats

	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}

	inflight     chan struct{} // one token per job published and not yet collected
	allCollected chan struct{}
	sealQueue    chan sealTask
	leaseMs      atomic.Int64
	sealWait     atomic.Int64 // moving average of claim-to-payload time, ns

	enqueued     atomic.Int64
	collected    atomic.Int64
	lastProgress atomic.Int64 // local ms of the latest collected result

	mu         sync.Mutex
	started    time.Time
	ended      time.Time
	stopReason string
}

// Progress is a snapshot of how far a run has come.
type Progress struct {
	Jobs      int
	Enqueued  int
	Collected int
}

// Execute runs a workload to its end: every result collected, ctx done, or
// no progress for Config.StallTimeout.
func Execute(ctx context.Context, cfg Config) (*Run, error) {
	r, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	<-r.Done()
	return r, nil
}

// Start pairs every daemon and sets the workload going in the background.
// It ends by itself (see Execute) or with Stop; ctx bounds the whole run.
func Start(ctx context.Context, cfg Config) (*Run, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Run{
		cfg:          cfg,
		rec:          newRecords(),
		st:           newStats(),
		done:         make(chan struct{}),
		inflight:     make(chan struct{}, cfg.MaxInFlight),
		allCollected: make(chan struct{}),
		sealQueue:    make(chan sealTask, 4096),
		siteIDs:      map[string]string{},
	}
	r.bal, err = newBalancer(cfg.BaseURLs, cfg.Attempts, cfg.AttemptTimeout, r.st.observeAttempt)
	if err != nil {
		return nil, err
	}
	r.http = &http.Client{Transport: r.bal}
	ccfg := peer.Config{BaseURLs: cfg.BaseURLs, HTTPClient: r.http, Kinds: []string{cfg.Kind}}
	if r.lanes, err = newLanes(cfg, ccfg); err != nil {
		return nil, err
	}
	for _, ln := range r.lanes {
		r.siteIDs[ln.keyID] = ln.siteID
	}
	r.protos = deviceProtocols(cfg)
	for _, dev := range cfg.Keys.Devices {
		r.rec.devices[dev.RunnerID] = dev.Keys.Public()
	}
	if err := r.planJobs(); err != nil {
		return nil, err
	}

	ctx, r.cancel = context.WithCancel(ctx)
	if err := r.pairAll(ctx); err != nil {
		r.cancel()
		r.bal.close()
		return nil, err
	}

	r.mu.Lock()
	r.started = time.Now()
	r.mu.Unlock()
	r.lastProgress.Store(nowMs())
	r.launch(ctx)
	go r.supervise(ctx)
	return r, nil
}

// deviceProtocols gives each running device its protocol: the run's, or
// in a mixed run "0" and "2" by turns among each owner's devices, each
// owner starting where the one before it did not, so that every owner
// with two devices has a daemon of each and owners of one device split.
func deviceProtocols(cfg Config) []string {
	out := make([]string, cfg.Daemons)
	seen, first := map[string]int{}, map[string]int{}
	for i, dev := range cfg.Keys.Devices[:cfg.Daemons] {
		out[i] = cfg.Protocol
		if cfg.Protocol != ProtocolMixed {
			continue
		}
		if _, ok := first[dev.Owner]; !ok {
			first[dev.Owner] = len(first)
		}
		out[i] = []string{ProtocolV0, ProtocolV2}[(first[dev.Owner]+seen[dev.Owner])%2]
		seen[dev.Owner]++
	}
	return out
}

// planJobs creates every job's record: protocol, site, id, owner and
// payload. A mixed run alternates the protocols; "2" jobs go round the "2"
// lanes, reusing each id once per site. Owners follow the running devices
// of the job's protocol round-robin, so work is spread in proportion to
// how many devices each owner has.
func (r *Run) planJobs() error {
	devices := map[string][]peer.DemoDevice{}
	lanes := map[string][]*lane{}
	for i, dev := range r.cfg.Keys.Devices[:r.cfg.Daemons] {
		devices[r.protos[i]] = append(devices[r.protos[i]], dev)
	}
	for _, ln := range r.lanes {
		lanes[ln.proto] = append(lanes[ln.proto], ln)
	}
	ordinal := map[string]int{}
	for i := range r.cfg.Jobs {
		proto := r.cfg.Protocol
		if proto == ProtocolMixed {
			proto = []string{ProtocolV0, ProtocolV2}[i%2]
		}
		if len(devices[proto]) == 0 {
			return fmt.Errorf("workload: no device runs a protocol %q daemon", proto)
		}
		k := ordinal[proto]
		ordinal[proto]++
		ln := lanes[proto][k%len(lanes[proto])]
		id := fmt.Sprintf("%s%07d", r.cfg.JobIDPrefix, k/len(lanes[proto]))
		if r.cfg.Protocol == ProtocolMixed {
			id = fmt.Sprintf("%sp%s-%07d", r.cfg.JobIDPrefix, proto, k/len(lanes[proto]))
		}
		var nonce [8]byte
		_, _ = rand.Read(nonce[:])
		payload, err := json.Marshal(map[string]any{"job": id, "site": ln.siteID, "n": i, "nonce": hex.EncodeToString(nonce[:])})
		if err != nil {
			return fmt.Errorf("workload: payload: %w", err)
		}
		dev := devices[proto][k%len(devices[proto])]
		key := jobKey(ln.siteID, id)
		r.rec.jobs[key] = &job{key: key, id: id, lane: ln, owner: dev.Owner, payload: payload, pendingDevice: map[string]protocol.PublicIdentity{}}
		r.rec.order = append(r.rec.order, key)
	}
	return nil
}

// pairAll pairs every daemon through the replicas, side by side.
func (r *Run) pairAll(ctx context.Context) error {
	devs := r.cfg.Keys.Devices[:r.cfg.Daemons]
	r.daemons = make([]*daemon, len(devs))
	errs := make([]error, len(devs))
	var wg sync.WaitGroup
	for i, dev := range devs {
		wg.Go(func() { r.daemons[i], errs[i] = r.newDaemon(ctx, dev, r.protos[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("workload: pairing: %w", err)
	}
	return nil
}

// launch starts every background loop.
func (r *Run) launch(ctx context.Context) {
	indices := make(chan int)
	r.wg.Go(func() {
		defer close(indices)
		for i := range r.cfg.Jobs {
			select {
			case indices <- i:
			case <-ctx.Done():
				return
			}
		}
	})
	for range r.cfg.EnqueueConcurrency {
		r.wg.Go(func() {
			for i := range indices {
				r.enqueue(ctx, r.rec.order[i])
			}
		})
	}
	for _, ln := range r.lanes {
		r.wg.Go(func() { r.pendingLoop(ctx, ln) })
		r.wg.Go(func() { r.resultsLoop(ctx, ln) })
	}
	for range r.cfg.SealWorkers {
		r.wg.Go(func() { r.sealLoop(ctx) })
	}
	for _, d := range r.daemons {
		r.wg.Go(func() { d.claimLoop(ctx) })
		r.wg.Go(func() { d.heartbeatLoop(ctx) })
	}
}

// supervise ends the run when every result is collected, ctx ends, or
// nothing has been collected for StallTimeout, then waits for every loop.
func (r *Run) supervise(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastLog := time.Now()
	reason := ""
	for reason == "" {
		select {
		case <-r.allCollected:
			reason = "complete"
		case <-ctx.Done():
			reason = "stopped: " + context.Cause(ctx).Error()
		case <-tick.C:
			if idle := time.Duration(nowMs()-r.lastProgress.Load()) * time.Millisecond; idle > r.cfg.StallTimeout {
				reason = fmt.Sprintf("stalled: nothing collected for %s", idle.Round(time.Second))
			}
			if r.cfg.Logf != nil && time.Since(lastLog) >= 5*time.Second {
				lastLog = time.Now()
				p := r.Progress()
				r.cfg.Logf("workload: %d/%d enqueued, %d collected", p.Enqueued, p.Jobs, p.Collected)
			}
		}
	}
	r.mu.Lock()
	r.ended = time.Now()
	r.stopReason = reason
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	r.bal.close()
	close(r.done)
}

// Done is closed when the run has ended and every loop has stopped.
func (r *Run) Done() <-chan struct{} { return r.done }

// Stop ends the run early and waits until it has stopped.
func (r *Run) Stop() {
	r.cancel()
	<-r.done
}

// Progress reports how far the run has come.
func (r *Run) Progress() Progress {
	return Progress{Jobs: r.cfg.Jobs, Enqueued: int(r.enqueued.Load()), Collected: int(r.collected.Load())}
}

// WaitCollected polls until at least n results are collected, the run ends,
// or ctx ends.
func (r *Run) WaitCollected(ctx context.Context, n int) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if int(r.collected.Load()) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("workload: %d of %d results collected: %w", r.collected.Load(), n, ctx.Err())
		case <-r.done:
			if int(r.collected.Load()) >= n {
				return nil
			}
			return fmt.Errorf("workload ended (%s) with %d of %d results collected", r.StopReason(), r.collected.Load(), n)
		case <-t.C:
		}
	}
}

// StopReason says why the run ended ("" while running).
func (r *Run) StopReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopReason
}

// call times one request and records its outcome. A 429 is the relay
// asking this caller to slow down: the call waits the retryAfter it was
// given and is sent again, as a well-behaved peer would, and each 429 is
// counted. Failures caused by the run stopping are not counted.
//
// It reports the balancer's tries beyond the first, summed over the call,
// and the replica that gave the final answer.
func (r *Run) call(ctx context.Context, endpoint string, fn func(ctx context.Context) error) (callInfo, error) {
	var total callInfo
	for {
		cctx, ci := withCallInfo(ctx)
		t0 := time.Now()
		err := fn(cctx)
		total.retries += ci.retries
		total.host = ci.host
		if err != nil && ctx.Err() != nil {
			return total, err
		}
		r.st.call(endpoint, time.Since(t0), ci, err)
		r.noteUnreadable(endpoint, err)
		if peer.ErrorCode(err) != protocol.CodeRateLimited {
			return total, err
		}
		if clock.Sleep(ctx, retryAfter(err)) != nil {
			return total, err
		}
	}
}

// noteUnreadable counts a 2xx answer the peer could not read: the "2"
// peers read answers as strictly as the published clients, which would
// fail on it too. Claims are judged apart (daemon.noteUnreadable).
func (r *Run) noteUnreadable(endpoint string, err error) {
	var bad *peer.DecodeError
	if endpoint == "claim" || !errors.As(err, &bad) {
		return
	}
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	if r.rec.unreadable[endpoint] == 0 {
		r.problem(nil, Inconsistent, "%s answered %d with a body the peer cannot read (later ones are counted in the report): %v", endpoint, bad.Status, bad)
	}
	r.rec.unreadable[endpoint]++
}

// unreadable reports whether err is a 2xx answer that did not parse.
func unreadable(err error) bool {
	var bad *peer.DecodeError
	return errors.As(err, &bad)
}

// retryAfter is how long a 429 asks the caller to wait (its retryAfter is
// whole seconds), capped so that a run stays bounded.
func retryAfter(err error) time.Duration {
	var e *peer.Error
	d := time.Second
	if errors.As(err, &e) && e.Body.RetryAfter > 0 {
		d = time.Duration(e.Body.RetryAfter) * time.Second
	}
	return min(d, 5*time.Second)
}

// noteSealWait folds one claim-to-payload time into the moving average.
func (r *Run) noteSealWait(d time.Duration) {
	for {
		old := r.sealWait.Load()
		next := int64(d)
		if old > 0 {
			next = old + (int64(d)-old)/16
		}
		if r.sealWait.CompareAndSwap(old, next) {
			return
		}
	}
}

// problem records a violation found while running.
func (r *Run) problem(j *job, kind, format string, args ...any) {
	v := Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)}
	if j == nil {
		r.rec.general = append(r.rec.general, v)
		return
	}
	v.JobID, v.Site = j.id, j.siteID()
	j.problems = append(j.problems, v)
}

// enqueue publishes one job, trying again (the same id is idempotent) until
// it is accepted or the run ends.
func (r *Run) enqueue(ctx context.Context, key string) {
	select {
	case r.inflight <- struct{}{}:
	case <-ctx.Done():
		return
	}
	r.rec.mu.Lock()
	j := r.rec.jobs[key]
	j.deadlineAt = time.Now().Add(r.cfg.JobTTL).UnixMilli()
	r.rec.mu.Unlock()
	retried := false
	for {
		var resp protocol.EnqueueResponse
		ci, err := r.call(ctx, "site/enqueue", func(ctx context.Context) (err error) {
			resp, err = j.lane.enqueue(ctx, j, r.cfg.Kind)
			return err
		})
		retried = retried || ci.retries > 0
		if err == nil {
			r.rec.mu.Lock()
			j.enqueued, j.enqueuedAt = true, nowMs()
			j.enqueueState, j.enqueueRetried = resp.State, retried
			r.rec.mu.Unlock()
			r.enqueued.Add(1)
			return
		}
		if ctx.Err() != nil || unreadable(err) {
			return
		}
		if st := peer.ErrorStatus(err); st != 0 && st < 500 {
			r.rec.mu.Lock()
			r.problem(j, Inconsistent, "enqueue refused: %v", err)
			r.rec.mu.Unlock()
			return
		}
		// A 503 or a lost answer does not say the job was not created.
		retried = true
		if clock.Sleep(ctx, 100*time.Millisecond) != nil {
			return
		}
	}
}

// fraction maps a key to [0, 1) deterministically, so the same job or
// lease always gets the same decision.
func fraction(key string) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	// FNV's high bits barely move between keys that differ at the end;
	// a splitmix64 finaliser spreads every bit over the whole word.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / float64(1<<53)
}
