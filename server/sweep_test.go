package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/valkey"
)

// backlogStore is a store whose Sweep settles up to batch jobs of a backlog
// per call, as a bounded store does; every other method is left out.
type backlogStore struct {
	store.RoutingStore
	mu      sync.Mutex
	backlog int
	batch   int
	calls   int
	// onSweep runs after each call, under the lock, with the call's number.
	onSweep func(call int) error
}

func (s *backlogStore) Sweep(context.Context) (store.SweepResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.onSweep != nil {
		if err := s.onSweep(s.calls); err != nil {
			return store.SweepResult{}, err
		}
	}
	var res store.SweepResult
	for range min(s.batch, s.backlog) {
		res.Expired = append(res.Expired, "job-"+strconv.Itoa(s.backlog))
		s.backlog--
	}
	return res, nil
}

func (s *backlogStore) state() (backlog, calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backlog, s.calls
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Issue 12 finding 4: the sweeper made one bounded sweep per interval, so
// a backlog drained at one batch per interval. Within its slice it now
// sweeps again while a sweep reports work, and stops at the first that
// reports none.
func TestSweepSliceDrainsABacklogOfManyBatches(t *testing.T) {
	st := &backlogStore{backlog: 10*512 + 7, batch: 512}
	workLeft := sweepSlice(t.Context(), st, time.Second, clock.NewManual(time.Unix(0, 0)), quietLogger())
	backlog, calls := st.state()
	require.Zero(t, backlog)
	require.Equal(t, 12, calls, "eleven calls with work, then one that reports none")
	require.False(t, workLeft, "the slice ended on a sweep that found nothing due")
}

func TestSweepSliceStopsWhenItsTimeIsSpent(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	st := slowBacklog(clk, 0)
	workLeft := sweepSlice(t.Context(), st, time.Second, clk, quietLogger())
	backlog, calls := st.state()
	require.Equal(t, 3, calls, "the third call ends past the slice")
	require.Equal(t, 7*512, backlog, "the rest waits for the next slice")
	require.True(t, workLeft, "the slice ended with work left")
}

// slowBacklog is a backlog of ten batches whose every sweep takes 400 ms
// of clk, and whose sweep number failAt fails (none when 0).
func slowBacklog(clk *clock.Manual, failAt int) *backlogStore {
	return &backlogStore{backlog: 10 * 512, batch: 512, onSweep: func(call int) error {
		clk.Advance(400 * time.Millisecond)
		if call == failAt {
			return errors.New("store down")
		}
		return nil
	}}
}

// startSweeper runs sweepOnTicks on st in slices of slice; stop ends it
// and waits for it.
func startSweeper(t *testing.T, st *backlogStore, slice time.Duration, clk clock.Clock) (ticks chan<- time.Time, stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweepOnTicks(ctx, st, ch, slice, clk, quietLogger())
	}()
	return ch, func() { cancel(); <-done }
}

// Issue 12 finding 4: a slice spent with work left was followed by a rest
// until the next tick, so a backlog drained at most half the time. The
// sweeper now starts the next slice at once, and rests only once a sweep
// finds nothing due.
func TestSweeperKeepsSweepingPastItsSliceWhileABacklogRemains(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	st := slowBacklog(clk, 0)
	ticks, stop := startSweeper(t, st, time.Second, clk)
	ticks <- time.Now()
	// No second tick comes: only back-to-back slices can drain it all.
	require.Eventually(t, func() bool { backlog, _ := st.state(); return backlog == 0 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { _, calls := st.state(); return calls == 11 }, 10*time.Second, time.Millisecond,
		"ten calls with work, then one that reports none")
	// The sweeper is resting now: it takes the next tick.
	ticks <- time.Now()
	require.Eventually(t, func() bool { _, calls := st.state(); return calls == 12 }, 10*time.Second, time.Millisecond)
	stop()
	_, calls := st.state()
	require.Equal(t, 12, calls, "one sweep for the tick, which found nothing due")
}

// A slice that ends on a failed sweep is not followed by another: the
// sweeper rests until the next tick, as before.
func TestSweeperRestsAfterAFailedSweep(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	st := slowBacklog(clk, 4)
	ticks, stop := startSweeper(t, st, time.Second, clk)
	ticks <- time.Now()
	// A first slice of three calls, a second ending at the failed fourth.
	require.Eventually(t, func() bool { _, calls := st.state(); return calls == 4 }, 10*time.Second, time.Millisecond)
	stop()
	backlog, calls := st.state()
	require.Equal(t, 4, calls, "no slice follows the failure within the tick")
	require.Equal(t, 7*512, backlog, "the three calls before the failure settled a batch each")
}

func TestSweepSliceStopsAtAFailedSweep(t *testing.T) {
	st := &backlogStore{backlog: 10 * 512, batch: 512, onSweep: func(call int) error {
		if call == 2 {
			return errors.New("store down")
		}
		return nil
	}}
	workLeft := sweepSlice(t.Context(), st, time.Second, clock.NewManual(time.Unix(0, 0)), quietLogger())
	_, calls := st.state()
	require.Equal(t, 2, calls, "a failed sweep ends the slice; the next tick tries again")
	require.False(t, workLeft, "a failed sweep is not work left: the sweeper rests")
}

// One tick drains a backlog many batches deep: the sweeper no longer
// waits an interval per batch.
func TestSweeperDrainsABacklogOnOneTick(t *testing.T) {
	st := &backlogStore{backlog: 5*512 + 1, batch: 512}
	ticks, stop := startSweeper(t, st, time.Hour, clock.NewManual(time.Unix(0, 0)))
	ticks <- time.Now()
	require.Eventually(t, func() bool { backlog, _ := st.state(); return backlog == 0 }, 10*time.Second, time.Millisecond)
	stop()
}

// On a real Valkey store, one slice drains an expired backlog many sweep
// batches deep (the Valkey store settles 128 a call, so 1,541 take 13).
func TestSweepSliceDrainsAValkeyBacklog(t *testing.T) {
	srv := valkeytest.Start(t)
	s, err := valkey.NewFromClient(srv.Client(t), valkeytest.Prefix(t))
	require.NoError(t, err)
	ctx := t.Context()
	now, err := s.Now(ctx)
	require.NoError(t, err)
	const backlog = 3*512 + 5
	for i := range backlog {
		st := protocol.JobStub{ID: fmt.Sprintf("j%04d", i), Kind: protocol.KindGenerate, Owner: "alice", Site: "SITE",
			Audience: protocol.AudiencePublic, SizeClass: "small", DeadlineAt: now - time.Hour.Milliseconds()}
		_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: "site", Stub: st})
		require.NoError(t, err)
	}
	sweepSlice(ctx, s, time.Minute, clock.NewManual(time.Unix(0, 0)), quietLogger())
	jobs, err := s.Jobs(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, jobs, "one slice settled every batch")
}
