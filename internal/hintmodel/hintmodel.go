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
var Full = Rules{RefuseStale: true, CompareAndClear: true, Adopt: true}

// Limits bound the system explored.
type Limits struct {
	// Enqueues is how many enqueues of the route run, each once, retrying
	// after a refusal up to Retries times.
	Enqueues, Retries int
	// Claims is how many times a claim reads the hint and visits the
	// bucket.
	Claims int
}

const maxEnqueues = 3

// enqueuer is one enqueue's progress.
type enqueuer struct {
	phase int8 // 0: not begun; 1: wrote ahead with gen; 2: landed; 3: gave up
	gen   int8
	tries int8
}

// state is the whole system: the hint, the bucket, the processes and the
// reports on their way to a clear. It is comparable, so it keys the set of
// states seen.
type state struct {
	hint      int8 // g > 0 live, -g cleared, 0 never written
	highest   int8 // the bucket's highest accepted or adopted generation
	live      int8 // the route's jobs not finished
	finished  int8 // jobs finished so far
	enq       [maxEnqueues]enqueuer
	claims    int8 // claims done
	claimRead int8 // hint value a claim in flight read (0: none in flight)
	reports   [4]int8
	nreports  int8
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
		return s.enq[0].phase == 3 && s.hint < 0
	})
	return found
}

// explore walks every state reachable under rules and lim, breadth first,
// until one satisfies stop; it returns the states seen and, when one was
// found, the steps to it.
func explore(rules Rules, lim Limits, stop func(state) bool) (int, []string, bool) {
	lim.Enqueues = min(lim.Enqueues, maxEnqueues)
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
	for i := 0; i < lim.Enqueues; i++ {
		out = append(out, enqueueSteps(s, i, rules, lim)...)
	}
	if s.live > 0 { // one of the route's jobs finishes (rule 3: report at 0)
		t := s
		t.live--
		t.finished++
		if t.live == 0 {
			t = withReport(t, t.highest)
		}
		out = append(out, next{t, "finish"})
	}
	out = append(out, claimSteps(s, rules, lim)...)
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
	case 0:
		t := s
		t.hint = abs(t.hint) + 1
		t.enq[i] = enqueuer{phase: 1, gen: t.hint, tries: e.tries}
		return []next{{t, fmt.Sprintf("%s writes ahead %d", name, t.hint)}}
	case 1:
		gaveUp := s
		gaveUp.enq[i].phase = 3
		out := []next{{gaveUp, name + " gives up"}}
		if rules.RefuseStale && e.gen <= s.highest {
			if int(e.tries) < lim.Retries {
				t := s
				t.enq[i] = enqueuer{phase: 0, tries: e.tries + 1}
				out = append(out, next{t, fmt.Sprintf("%s refused at %d", name, e.gen)})
			}
			return out
		}
		t := s
		t.highest = max(t.highest, e.gen)
		t.live++
		t.enq[i].phase = 2
		return append(out, next{t, fmt.Sprintf("%s lands %d", name, e.gen)})
	}
	return nil
}

// claimSteps are a claim's two steps: read the hint, then visit the bucket
// if the hint was live; an empty bucket adopts what was read (rule 3) and
// reports it.
func claimSteps(s state, rules Rules, lim Limits) []next {
	if s.claimRead == 0 {
		if int(s.claims) >= lim.Claims || s.hint <= 0 {
			return nil
		}
		t := s
		t.claimRead = s.hint
		return []next{{t, fmt.Sprintf("claim reads %d", s.hint)}}
	}
	t := s
	read := t.claimRead
	t.claimRead = 0
	t.claims++
	if t.live == 0 && rules.Adopt {
		t.highest = max(t.highest, read)
		t = withReport(t, t.highest)
		return []next{{t, fmt.Sprintf("claim finds it empty, adopts %d", read)}}
	}
	return []next{{t, "claim visits"}}
}

func withReport(s state, g int8) state {
	if int(s.nreports) < len(s.reports) {
		s.reports[s.nreports] = g
		s.nreports++
	}
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
