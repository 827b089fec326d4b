// Package hintmodel checks the route-hint rules of docs/sharding.md before
// they are built: it explores every interleaving of a small system (a few
// enqueues of one route, its jobs finishing, claims reading the hint, and
// the clears that follow each report) and reports any reachable state in
// which the route has live work while its hint reads as cleared. Rules can
// be switched off one at a time, so the tests show that each one is needed
// and that the checker finds what breaks without it.
package hintmodel

import "fmt"

// Rules are the parts of the protocol a check applies.
type Rules struct {
	// RefuseStale is rule 2: a bucket refuses an enqueue whose generation
	// is not above the highest it has accepted or adopted.
	RefuseStale bool
	// CompareAndClear is rule 4: a clear to -g happens only while the hint
	// still reads g. Without it a clear sets the hint to -|v|.
	CompareAndClear bool
	// Adopt is rule 3's second half: a claim that finds the route empty
	// adopts the hint value it read as the bucket's highest and reports it.
	Adopt bool
}

// Full is the protocol as designed.
func Full() Rules { return Rules{RefuseStale: true, CompareAndClear: true, Adopt: true} }

// Limits bound the system explored.
type Limits struct {
	// Enqueues is how many enqueues of the route run (at most
	// MaxEnqueues), each once, retrying after a refusal up to Retries
	// times.
	Enqueues, Retries int
	// Claims is how many claims run (at most MaxClaims), each reading the
	// hint and then visiting the bucket, interleaved with everything else
	// and with each other.
	Claims int
}

// The largest system the state type holds.
const (
	MaxEnqueues = 3
	MaxClaims   = 2
)

// An enqueue's phases.
const (
	notBegun int8 = iota
	wroteAhead
	landed
	gaveUp
)

// A claim's phases.
const (
	claimIdle int8 = iota
	claimRead
	claimDone
)

type enqueuer struct {
	phase, gen, tries int8
}

type claim struct {
	phase, read int8
}

// state is the whole system: the hint, the bucket, the processes and the
// reports on their way to a clear. It is comparable, so it keys the set of
// states seen. Every finish and every claim can report once, so reports
// holds them all.
type state struct {
	hint     int8 // g > 0 live, -g cleared, 0 never written
	highest  int8 // the bucket's highest accepted or adopted generation
	live     int8 // the route's jobs not finished
	enq      [MaxEnqueues]enqueuer
	claims   [MaxClaims]claim
	reports  [MaxEnqueues + MaxClaims]int8
	nreports int8
}

// Violation is a reachable state breaking the invariant, with the steps
// that reach it.
type Violation struct {
	Steps []string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("hintmodel: live work under a cleared hint after %d steps: %v", len(v.Steps), v.Steps)
}

// Check explores every state the system can reach under rules and limits,
// and returns how many it saw, and the first violation found (breadth
// first, so a shortest one), or nil.
func Check(rules Rules, lim Limits) (int, *Violation) {
	n, steps, found := explore(rules, lim, func(s state) bool { return s.live > 0 && s.hint <= 0 })
	if !found {
		return n, nil
	}
	return n, &Violation{Steps: steps}
}

// ClearsAnAbandonedHint reports whether one enqueue that writes ahead and
// then gives up, and one claim after it, can leave the hint cleared: that
// a hint no job will ever land under costs one empty claim, not one on
// every claim from then on (rule 3's adoption).
func ClearsAnAbandonedHint(rules Rules) bool {
	_, _, found := explore(rules, Limits{Enqueues: 1, Claims: 1}, func(s state) bool {
		return s.enq[0].phase == gaveUp && s.hint < 0
	})
	return found
}

// explore walks every state reachable under rules and lim, breadth first,
// until one satisfies stop; it returns the states seen and, when one was
// found, the steps to it.
func explore(rules Rules, lim Limits, stop func(state) bool) (int, []string, bool) {
	if lim.Enqueues > MaxEnqueues || lim.Claims > MaxClaims || lim.Retries > 100 {
		panic(fmt.Sprintf("hintmodel: limits %+v beyond what the model holds", lim))
	}
	type node struct {
		s    state
		prev int
		step string
	}
	nodes := []node{{prev: -1}}
	seen := map[state]bool{{}: true}
	for i := 0; i < len(nodes); i++ {
		if stop(nodes[i].s) {
			var steps []string
			for j := i; nodes[j].prev >= 0; j = nodes[j].prev {
				steps = append([]string{nodes[j].step}, steps...)
			}
			return len(seen), steps, true
		}
		for _, n := range successors(nodes[i].s, rules, lim) {
			if !seen[n.s] {
				seen[n.s] = true
				nodes = append(nodes, node{s: n.s, prev: i, step: n.step})
			}
		}
	}
	return len(seen), nil, false
}

type next struct {
	s    state
	step string
}

// successors lists every step one process can take from s.
func successors(s state, rules Rules, lim Limits) []next {
	var out []next
	for i := range lim.Enqueues {
		out = append(out, enqueueSteps(s, i, rules, lim)...)
	}
	if s.live > 0 { // one of the route's jobs finishes (rule 3: report at 0)
		t := s
		t.live--
		if t.live == 0 {
			t = withReport(t, t.highest)
		}
		out = append(out, next{t, "finish"})
	}
	for i := range lim.Claims {
		out = append(out, claimSteps(s, i, rules)...)
	}
	for k := int8(0); k < s.nreports; k++ { // a report reaches its clear, or is lost
		t := dropReport(s, k)
		out = append(out, next{t, fmt.Sprintf("lose report %d", s.reports[k])})
		g := s.reports[k]
		switch {
		case !rules.CompareAndClear:
			t.hint = -abs(t.hint)
		case t.hint == g:
			t.hint = -g
		}
		out = append(out, next{t, fmt.Sprintf("clear %d", g)})
	}
	return out
}

// enqueueSteps are enqueue i's steps: write ahead (rule 1), then land or
// be refused (rule 2), or give up after writing ahead (a caller that died
// or timed out).
func enqueueSteps(s state, i int, rules Rules, lim Limits) []next {
	e := s.enq[i]
	name := fmt.Sprintf("enqueue %d", i)
	switch e.phase {
	case notBegun:
		t := s
		t.hint = abs(t.hint) + 1
		t.enq[i] = enqueuer{phase: wroteAhead, gen: t.hint, tries: e.tries}
		return []next{{t, fmt.Sprintf("%s writes ahead %d", name, t.hint)}}
	case wroteAhead:
		quit := s
		quit.enq[i].phase = gaveUp
		out := []next{{quit, name + " gives up"}}
		if rules.RefuseStale && e.gen <= s.highest {
			if int(e.tries) < lim.Retries {
				t := s
				t.enq[i] = enqueuer{phase: notBegun, tries: e.tries + 1}
				out = append(out, next{t, fmt.Sprintf("%s refused at %d", name, e.gen)})
			}
			return out
		}
		t := s
		t.highest = max(t.highest, e.gen)
		t.live++
		t.enq[i].phase = landed
		return append(out, next{t, fmt.Sprintf("%s lands %d", name, e.gen)})
	}
	return nil
}

// claimSteps are claim i's two steps: read the hint, then visit the bucket
// if the hint was live; an empty bucket adopts what was read (rule 3) and
// reports it.
func claimSteps(s state, i int, rules Rules) []next {
	c := s.claims[i]
	name := fmt.Sprintf("claim %d", i)
	switch c.phase {
	case claimIdle:
		if s.hint <= 0 {
			return nil
		}
		t := s
		t.claims[i] = claim{phase: claimRead, read: s.hint}
		return []next{{t, fmt.Sprintf("%s reads %d", name, s.hint)}}
	case claimRead:
		t := s
		t.claims[i] = claim{phase: claimDone}
		if t.live == 0 && rules.Adopt {
			t.highest = max(t.highest, c.read)
			t = withReport(t, t.highest)
			return []next{{t, fmt.Sprintf("%s finds it empty, adopts %d", name, c.read)}}
		}
		return []next{{t, name + " visits"}}
	}
	return nil
}

// withReport adds a report on its way to a clear. Every finish that
// empties the route and every claim reports at most once, which the
// array is sized for, so an overflow is a bug in the model.
func withReport(s state, g int8) state {
	if int(s.nreports) == len(s.reports) {
		panic("hintmodel: more reports in flight than the model holds")
	}
	s.reports[s.nreports] = g
	s.nreports++
	return s
}

func dropReport(s state, k int8) state {
	copy(s.reports[k:], s.reports[k+1:])
	s.nreports--
	s.reports[s.nreports] = 0
	return s
}

func abs(x int8) int8 {
	if x < 0 {
		return -x
	}
	return x
}
