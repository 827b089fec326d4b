// Package leaktest fails a test that leaves goroutines running once its
// cleanup is done: a background loop (a sweeper, a fixture watcher, a
// client's reader) that its owner forgets to stop on shutdown.
//
// Check snapshots the goroutines alive when it is called, by goroutine id,
// and at the end compares ids, not counts: a goroutine from an earlier test
// that happens to exit meanwhile cannot hide a new one. Goroutines take a
// moment to return after they are told to stop, so the end check polls
// until the new ones are gone and fails, with their stacks, only when some
// outlive a grace period.
//
// A checked test must not call t.Parallel, and must not share its package's
// process-wide state for the first time inside the check (valkeytest.Shared,
// a signal.Notify): what runs beside it, or lives on after it by design,
// would count as its leak. Start a server the code under test talks to
// before Check, so the check runs while it still answers: a client whose
// server has gone may end its goroutines by itself and hide a missing Close.
package leaktest

import (
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// grace is how long the end check waits for goroutines that were told to
// stop to return. It bounds a failure's wait, never a passing test's.
const grace = 10 * time.Second

// pollEvery is how often the end check looks again.
const pollEvery = 5 * time.Millisecond

// processLived are frames of goroutines the standard library starts once,
// lazily, and keeps for the life of the process: they are not a test's to
// stop.
var processLived = []string{
	"os/signal.loop",
	"os/signal.signal_recv",
}

// Check registers, at this point of t's cleanups, the check that every
// goroutine started after this call has ended. Cleanups run last-first, so
// call Check first in the test: everything registered later (a server's
// stop, a client's Close) runs before the check.
func Check(t testing.TB) {
	t.Helper()
	checkWithin(t, grace)
}

// checkWithin is Check with the grace period given.
func checkWithin(t testing.TB, within time.Duration) {
	t.Helper()
	before := ids(snapshot())
	t.Cleanup(func() {
		t.Helper()
		if leaked := waitForExtra(before, within); len(leaked) > 0 {
			t.Errorf("leaktest: %d goroutine(s) still running %s after the test's cleanup:\n\n%s",
				len(leaked), within, strings.Join(leaked, "\n\n"))
		}
	})
}

// waitForExtra polls until no goroutine outside before is running, or the
// time is up, and returns the stacks of those still running then.
func waitForExtra(before map[int]bool, within time.Duration) []string {
	deadline := time.Now().Add(within)
	for {
		leaked := extra(before, snapshot())
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(pollEvery)
	}
}

// goroutine is one entry of a full stack dump.
type goroutine struct {
	id    int
	stack string
}

// extra returns the stacks, in id order, of the goroutines in now that are
// not in before and are not process-lived.
func extra(before map[int]bool, now []goroutine) []string {
	var out []string
	for _, g := range now {
		if before[g.id] || slices.ContainsFunc(processLived, func(f string) bool { return strings.Contains(g.stack, f+"(") }) {
			continue
		}
		out = append(out, g.stack)
	}
	return out
}

func ids(gs []goroutine) map[int]bool {
	m := make(map[int]bool, len(gs))
	for _, g := range gs {
		m[g.id] = true
	}
	return m
}

// snapshot returns every goroutine's id and stack.
func snapshot() []goroutine {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return parse(string(buf[:n]))
		}
		buf = make([]byte, 2*len(buf))
	}
}

var header = regexp.MustCompile(`^goroutine (\d+) \[`)

// parse splits a runtime.Stack(all) dump into its goroutines. Entries are
// separated by a blank line and start "goroutine N [state]:".
func parse(dump string) []goroutine {
	var out []goroutine
	for _, entry := range strings.Split(strings.TrimSpace(dump), "\n\n") {
		m := header.FindStringSubmatch(entry)
		if m == nil {
			continue
		}
		if id, err := strconv.Atoi(m[1]); err == nil {
			out = append(out, goroutine{id: id, stack: entry})
		}
	}
	return out
}
