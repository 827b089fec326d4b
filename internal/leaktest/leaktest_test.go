package leaktest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps its cleanups and errors, so a test
// can run a check to its end and look at the verdict.
type recorder struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Cleanup(f func())          { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(f string, a ...any) { r.errors = append(r.errors, fmt.Sprintf(f, a...)) }

// finish runs the cleanups last-first, as the testing package does.
func (r *recorder) finish() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// parkedUntil blocks until stop closes, then says it has returned; its
// name is what a failing check's stacks must show.
func parkedUntil(stop <-chan struct{}, exited chan<- struct{}) {
	<-stop
	close(exited)
}

func TestCheckFailsOnAGoroutineLeftRunning(t *testing.T) {
	rec := &recorder{TB: t}
	checkWithin(rec, 50*time.Millisecond)
	stop, exited := make(chan struct{}), make(chan struct{})
	go parkedUntil(stop, exited)
	rec.finish()
	close(stop)
	<-exited

	if len(rec.errors) != 1 {
		t.Fatalf("a goroutine left running gave %d errors, want 1: %q", len(rec.errors), rec.errors)
	}
	if !strings.Contains(rec.errors[0], "leaktest.parkedUntil(") {
		t.Fatalf("the failure does not show the leaked goroutine's stack:\n%s", rec.errors[0])
	}
}

// A goroutine told to stop by a cleanup registered after Check is waited
// for, however long it takes to return within the grace period.
func TestCheckWaitsForAGoroutineItsCleanupStops(t *testing.T) {
	rec := &recorder{TB: t}
	checkWithin(rec, grace)
	stop, exited := make(chan struct{}), make(chan struct{})
	release := make(chan struct{})
	go func() {
		parkedUntil(stop, make(chan struct{}))
		<-release // still running for a while after it was told to stop
		close(exited)
	}()
	rec.Cleanup(func() {
		close(stop)
		go func() { time.Sleep(20 * time.Millisecond); close(release) }()
	})
	rec.finish()
	<-exited
	if len(rec.errors) != 0 {
		t.Fatalf("a goroutine stopped in cleanup was reported: %q", rec.errors)
	}
}

// Goroutines alive before Check are not the test's, even if more start or
// end meanwhile.
func TestCheckIgnoresGoroutinesFromBefore(t *testing.T) {
	stop, exited := make(chan struct{}), make(chan struct{})
	go parkedUntil(stop, exited)
	defer func() { close(stop); <-exited }()

	rec := &recorder{TB: t}
	checkWithin(rec, 50*time.Millisecond)
	rec.finish()
	if len(rec.errors) != 0 {
		t.Fatalf("a goroutine from before the check was reported: %q", rec.errors)
	}
}

func TestExtraSkipsProcessLivedGoroutines(t *testing.T) {
	dump := "goroutine 1 [running]:\nmain.main()\n\n" +
		"goroutine 7 [syscall]:\nos/signal.signal_recv()\n\truntime/sigqueue.go:152\nos/signal.loop()\n\n" +
		"goroutine 9 [select]:\ngithub.com/byollm/relayd/server.sweepOnTicks(...)\n"
	got := extra(map[int]bool{1: true}, parse(dump))
	if len(got) != 1 || !strings.HasPrefix(got[0], "goroutine 9 [select]:") {
		t.Fatalf("extra = %q, want only goroutine 9", got)
	}
}
