// Package server runs relayd: it opens the backend and the projection, serves
// the public and admin listeners, sweeps in the background, reloads the
// fixture on SIGHUP and drains on shutdown.
package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/byollm/relayd/admission"
	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/metrics"
	"github.com/byollm/relayd/plane"
	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/backend"
)

// Hooks lets the caller observe a running server; tests use it to learn the
// addresses the listeners actually bound.
type Hooks struct {
	// Listening is called once both listeners are bound.
	Listening func(public, admin net.Addr)
	// Reload delivers reload requests (SIGHUP in cmd/relayd).
	Reload <-chan struct{}
}

// Run serves until ctx is cancelled, then drains: readiness fails first,
// in-flight requests get cfg.ShutdownTimeout to finish, then the store closes.
func Run(ctx context.Context, cfg config.Config, logger *slog.Logger, hooks Hooks) error {
	m := metrics.New()
	if cfg.TestClockOffset != 0 {
		logger.Warn("TEST ONLY: this replica's clock is shifted", slog.Duration("offset", cfg.TestClockOffset))
	}
	// The ring is checked at boot, so a bad key refuses to start.
	ring, err := openGrantKeys(cfg, logger)
	if err != nil {
		return err
	}
	external, err := openExternalAuthor(cfg.GrantAuthor, ring, LocalClock(cfg), logger)
	if err != nil {
		return err
	}
	b, err := backend.Open(ctx, backend.Options{
		Kind: cfg.Store, Valkey: cfg.StoreValkeyOptions(), Clock: LocalClock(cfg),
		RateLimit: cfg.RateLimit, SiteRateLimit: cfg.SiteRateLimit, Logger: logger, OnStoreRetry: m.StoreRetried,
	})
	if err != nil {
		return err
	}
	watchResultsCache(m, b.ResultsCache)
	st := m.InstrumentStore(b.Store)
	defer func() {
		if err := st.Close(); err != nil {
			logger.Error("closing the store", slog.String("error", err.Error()))
		}
	}()
	st, b = withCallDeadlines(st, b, cfg.StoreTimeout)
	src, err := openProjection(ctx, cfg, m, logger)
	if err != nil {
		return err
	}
	relay := plane.New(plane.Config{
		SiteID: cfg.SiteID, BasePath: cfg.BasePath, LeaseMs: cfg.LeaseMs, Store: st, Pairings: m.InstrumentPairings(b.Pairings),
		ResultsAnswerBytes: cfg.ResultsCacheBytes,
		Projection:         src.Current, Clock: LocalClock(cfg), Logger: logger,
		MaxBodyBytes: cfg.MaxBodyBytes, PublicDebug: cfg.PublicDebug, ObserveRequest: m.ObserveRequest, RequestStarted: m.RequestStarted,
		Limits:      protocol.Limits{MaxListItems: cfg.MaxListItems, MaxCiphertextBytes: cfg.MaxCiphertextBytes},
		RunnerLimit: ratelimit.Stored(b.RateLimit, cfg.RateLimit), SiteLimit: ratelimit.Stored(b.SiteRateLimit, cfg.SiteRateLimit), TrustForwardedFor: cfg.TrustForwardedFor,
		Protocols: plane.Protocols{V0: cfg.Protocols.V0, V2: cfg.Protocols.V2}, V2: v2Options(cfg, grantAuthor(ring, external, cfg.GrantOwnDefault, m)), AdminHosts: cfg.AdminHostNames(),
	})
	admin := plane.NewAdmin(relay)
	admin.Mount("/metrics", m.Handler())
	if cfg.Pprof {
		admin.Mount("/debug/pprof/*", profiles())
	}
	publicLn, adminLn, err := listen(cfg)
	if err != nil {
		return err
	}
	publicSrv := newHTTPServer(cfg, oneWaitPerRequest(relay.Handler()), logger)
	adminSrv := newHTTPServer(cfg, admin.Handler(), logger)

	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBackground()
	errs := make(chan error, 2)
	go func() { errs <- serve(publicSrv, publicLn) }()
	go func() { errs <- serve(adminSrv, adminLn) }()
	// The store closes only once every loop that calls it has returned, so
	// a sweep under way at shutdown finishes on an open client.
	loops := startLoops(bg, cfg, st, src, hooks, logger)
	defer loops.Wait()
	logServing(logger, cfg, publicLn.Addr(), adminLn.Addr(), src.Current().Hash())
	if hooks.Listening != nil {
		hooks.Listening(publicLn.Addr(), adminLn.Addr())
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errs:
		logger.Error("a listener failed", slog.String("error", serveErr.Error()))
	}
	drain(ctx, cfg, admin, publicSrv, adminSrv, stopBackground, logger)
	return serveErr
}

// startLoops starts the replica's background loops (the fixture watcher,
// the reload loop and the sweeper), all stopped by cancelling bg; the group
// is done once every one has returned.
func startLoops(bg context.Context, cfg config.Config, st store.RoutingStore, src *projection.Source, hooks Hooks, logger *slog.Logger) *sync.WaitGroup {
	var loops sync.WaitGroup
	loops.Go(func() {
		if err := src.Run(bg); err != nil && !errors.Is(err, context.Canceled) {
			logger.Error("fixture watcher stopped", slog.String("error", err.Error()))
		}
	})
	loops.Go(func() { reloadOnRequest(bg, src, hooks.Reload, logger) })
	if cfg.SweepInterval > 0 {
		loops.Go(func() { sweepEvery(bg, st, cfg.SweepInterval, LocalClock(cfg), logger) })
	}
	return &loops
}

// v2Options are protocol "2"'s settings as the flags give them, with the
// grant author, if any.
func v2Options(cfg config.Config, grants *codec2.Grants) codec2.Options {
	return codec2.Options{
		VerificationURL: cfg.VerificationURL, DaemonFloor: cfg.DaemonFloor, UpdateOffer: cfg.UpdateOffer,
		PairingCapacity: cfg.PairingCapacity, Limits: proto2.Limits{MaxListItems: cfg.MaxListItems}, Grants: grants,
	}
}

// grantAuthor is relayd's local grant author over ring beside the
// external author, if any (G-R35), counted in m, or nil when neither is
// configured: then every device keeps P2-D4 (DG1). The local author's
// owner's default (G-R8) is --grant-own-default, on unless set false (DG3).
func grantAuthor(ring *admission.KeyRing, external *admission.External, ownDefault bool, m *metrics.Metrics) *codec2.Grants {
	if ring.Len() == 0 && external == nil {
		return nil
	}
	authors := admission.Authors{Observe: m.GrantAuthored}
	if ring.Len() > 0 {
		authors.Local = admission.Author{Law: admission.Law{OwnDefault: ownDefault}, Keys: ring, Random: rand.Reader}
	}
	if external != nil {
		authors.External = external
	}
	return &codec2.Grants{
		Author:  authors,
		Decided: func(d admission.Decision) { m.SignedGrantDecided(decisionLabels(d)) },
		Skipped: m.GrantClaimSkipped, SettleFailed: m.GrantSettleFailed,
	}
}

// decisionLabels are a decision's metric labels (G-R51): a reason outside
// G-R12's closed set is "other".
func decisionLabels(d admission.Decision) (outcome, reason string, permanent bool) {
	if d.Granted {
		return "granted", "", false
	}
	switch d.Reason {
	case admission.ReasonUnknownSite, admission.ReasonStoreUnavailable, admission.ReasonNotConsented,
		admission.ReasonConsentPaused, admission.ReasonNotAMember, admission.ReasonUnmapped,
		admission.ReasonResolvedElsewhere, admission.ReasonAuthorUnavailable, admission.ReasonAuthorInvalid,
		admission.ReasonSignFailed:
		return "declined", string(d.Reason), d.Permanent()
	}
	return "declined", "other", d.Permanent()
}

// logServing says the replica is up, and what it serves.
func logServing(logger *slog.Logger, cfg config.Config, public, admin net.Addr, projection string) {
	logger.Info("relayd serving", slog.String("public", public.String()), slog.String("admin", admin.String()),
		slog.String("store", cfg.Store), slog.String("site_id", cfg.SiteID), slog.String("projection", projection),
		slog.String("protocols", cfg.Protocols.String()), slog.Bool("device_code_pairing", cfg.VerificationURL != ""))
	if cfg.Protocols.V2 {
		// Decision P2-D5: without a control plane nothing can refuse a job at
		// enqueue, and the reference asks a relay in that state to say so.
		logger.Warn(plane.NoEnqueuePolicy)
	}
}

// openGrantKeys loads --grant-key-file into package admission, the one
// holder of key material, and says at boot which grant mode runs (G-R50),
// naming keys by their ids only.
func openGrantKeys(cfg config.Config, logger *slog.Logger) (*admission.KeyRing, error) {
	ring, err := admission.LoadKeyRing(cfg.GrantKeyFiles, logger)
	if err != nil {
		return nil, fmt.Errorf("grant keys: %w", err)
	}
	current, ok := ring.Current()
	if !ok {
		if !cfg.GrantAuthor.Enabled() {
			logger.Info("grants: off — devices serve their owners only (P2-D4)")
		}
		return ring, nil
	}
	logger.Info(fmt.Sprintf("grants: local, current key %s, %d keys", admission.KeyID(current), ring.Len()),
		slog.String("current", admission.KeyID(current)), slog.Any("key_ids", ring.KeyIDs()), slog.Int("keys", ring.Len()))
	return ring, nil
}

// openProjection loads the fixture and exports its reload counters.
func openProjection(ctx context.Context, cfg config.Config, m *metrics.Metrics, logger *slog.Logger) (*projection.Source, error) {
	src, err := projection.Open(ctx, projection.Options{Path: cfg.Fixture, Logger: logger, PollInterval: cfg.FixturePoll})
	if err != nil {
		return nil, fmt.Errorf("load fixture: %w", err)
	}
	m.WatchProjection(func() (uint64, uint64) {
		status := src.Status()
		return status.Reloads, status.Failures
	})
	if _, ok := src.Current().SiteFor(cfg.SiteID); !ok && cfg.Protocols.V0 {
		logger.Warn(`the fixture does not register this relay's site; protocol "0" pairing and site plane will refuse everyone`, slog.String("site_id", cfg.SiteID))
	}
	return src, nil
}

// listen binds the public and the admin listener.
func listen(cfg config.Config) (public, admin net.Listener, err error) {
	public, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	admin, err = net.Listen("tcp", cfg.AdminListen)
	if err != nil {
		public.Close()
		return nil, nil, fmt.Errorf("admin listen on %s: %w", cfg.AdminListen, err)
	}
	return public, admin, nil
}

// drain fails readiness before refusing connections, so a load balancer
// moves new work elsewhere while what is in flight completes; then it stops
// the background work and the admin listener.
func drain(ctx context.Context, cfg config.Config, admin *plane.Admin, publicSrv, adminSrv *http.Server, stopBackground func(), logger *slog.Logger) {
	admin.Drain()
	logger.Info("draining", slog.Duration("timeout", cfg.ShutdownTimeout))
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := publicSrv.Shutdown(drainCtx); err != nil {
		logger.Error("in-flight requests did not finish in time", slog.String("error", err.Error()))
	}
	stopBackground()
	if err := adminSrv.Shutdown(drainCtx); err != nil {
		logger.Error("admin listener shutdown", slog.String("error", err.Error()))
	}
	logger.Info("stopped")
}

// LocalClock is this process's own clock: the system clock, shifted by the
// test-only --test-clock-offset. Valkey's clock is never shifted.
func LocalClock(cfg config.Config) clock.Clock {
	if cfg.TestClockOffset == 0 {
		return clock.System{}
	}
	return clock.Offset{Base: clock.System{}, Delta: cfg.TestClockOffset}
}

// newHTTPServer serves h with the configured header limits: a client
// gets cfg.ReadHeaderTimeout to send at most cfg.MaxHeaderBytes of headers
// (net/http answers 431 beyond that), so slow or bloated headers cannot
// hold a connection or memory for long.
func newHTTPServer(cfg config.Config, h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

func serve(srv *http.Server, ln net.Listener) error {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func reloadOnRequest(ctx context.Context, src *projection.Source, requests <-chan struct{}, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-requests:
			if err := src.Reload(ctx); err != nil {
				logger.Error("fixture reload refused; the previous projection stays", slog.String("error", err.Error()))
			}
		}
	}
}

// sweepEvery applies passed deadlines on a timer, so a job abandoned while no
// daemon or site is calling still returns to the queue. Replicas sweep
// independently; the store makes concurrent sweeps safe.
func sweepEvery(ctx context.Context, st store.RoutingStore, every time.Duration, clk clock.Clock, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	sweepOnTicks(ctx, st, t.C, every/sweepShare, clk, logger)
}

// sweepShare is the part of each interval one sweep slice may take. A
// slice that ends with work left is followed by another at once, so a
// backlog drains at the store's pace; the rest of the interval is spent
// only once nothing is due.
const sweepShare = 2

// sweepOnTicks runs a sweep slice of at most slice on each tick, and
// another at once while a slice ends with work left: during a backlog the
// sweeper sweeps back to back, and it rests until the next tick only once
// a sweep finds nothing due. A claim waits at most one bounded sweep
// either way, so resting during a backlog would only halve the drain.
func sweepOnTicks(ctx context.Context, st store.RoutingStore, ticks <-chan time.Time, slice time.Duration, clk clock.Clock, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			for workLeft := true; workLeft && ctx.Err() == nil; {
				workLeft = sweepSlice(ctx, st, slice, clk, logger)
			}
		}
	}
}

// sweepSlice sweeps again while a sweep reports work, as Sweep asks, until
// the slice of time is spent: one bounded sweep per tick would drain an
// expired backlog at one batch per interval. It reports whether the slice
// ended with work left, its last sweep having reported some.
func sweepSlice(ctx context.Context, st store.RoutingStore, slice time.Duration, clk clock.Clock, logger *slog.Logger) (workLeft bool) {
	until := clk.Now().Add(slice)
	calls, requeued, expired := 0, 0, 0
	for ctx.Err() == nil {
		res, err := st.Sweep(ctx)
		if err != nil {
			logger.Warn("background sweep failed", slog.String("error", err.Error()))
			break
		}
		calls++
		requeued, expired = requeued+len(res.Requeued), expired+len(res.Expired)
		if len(res.Lapsed) > 0 {
			// Decision P2-D6: a site that claims and never seals shows here.
			logger.Info("sealing windows lapsed", slog.Int("lapsed", len(res.Lapsed)), slog.Any("job_ids", res.Lapsed))
		}
		if len(res.Requeued)+len(res.Expired) == 0 {
			break
		}
		if !clk.Now().Before(until) {
			workLeft = true
			break
		}
	}
	if requeued+expired > 0 {
		logger.Debug("swept", slog.Int("requeued", requeued), slog.Int("expired", expired), slog.Int("calls", calls))
	}
	return workLeft
}

// profiles serves Go's runtime profiles; only ever on the admin listener.
func profiles() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// watchResultsCache exports the results cache of a store that keeps one
// (the Valkey store).
func watchResultsCache(m *metrics.Metrics, read func() backend.ResultsCache) {
	if read == nil {
		return
	}
	m.WatchResultsCache(func() metrics.ResultsCache {
		c := read()
		return metrics.ResultsCache{BytesUsed: c.BytesUsed, OverLimit: c.OverLimit, OverLimitBytes: c.OverLimitBytes, Partial: c.Partial}
	})
}
