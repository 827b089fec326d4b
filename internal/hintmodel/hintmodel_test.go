package hintmodel

import (
	"testing"

	"github.com/stretchr/testify/require"
)

var limits = Limits{Enqueues: MaxEnqueues, Retries: 2, Claims: MaxClaims}

// The rules as designed: no interleaving of three enqueues (each may be
// refused and retry, or give up after writing ahead), their jobs
// finishing, two claims running at once and the clears of every report
// (each may be lost) leaves the route with live work under a cleared hint.
func TestTheDesignedRulesNeverHideLiveWork(t *testing.T) {
	n, v := Check(Full(), limits)
	require.Nil(t, v)
	t.Logf("%d states explored", n)
}

// The exploration reaches the states the result is about, so it is not
// true for want of getting anywhere: every enqueue landed; an enqueue
// refused as stale that retried and landed; two claims in flight at once;
// a hint cleared (by a claim's adoption) while an enqueue it refuses is
// still on its way.
func TestTheExplorationReachesTheStatesThatMatter(t *testing.T) {
	reach := func(what string, pred func(state) bool) {
		t.Helper()
		_, _, found := explore(Full(), limits, pred)
		require.True(t, found, what)
	}
	reach("every enqueue landed", func(s state) bool {
		return s.enq[0].phase == landed && s.enq[1].phase == landed && s.enq[2].phase == landed
	})
	reach("a refused enqueue retried and landed", func(s state) bool {
		return s.enq[0].phase == landed && s.enq[0].tries > 0
	})
	reach("two claims read the hint at once", func(s state) bool {
		return s.claims[0].phase == claimRead && s.claims[1].phase == claimRead
	})
	reach("a hint cleared under an enqueue still on its way", func(s state) bool {
		return s.hint < 0 && s.enq[0].phase == wroteAhead && s.enq[0].gen <= s.highest
	})
}

// Without rule 2 a late enqueue lands under a generation a clear already
// used, so live work sits under a cleared hint: the checker finds it.
func TestWithoutRefusingStaleGenerationsLiveWorkIsHidden(t *testing.T) {
	r := Full()
	r.RefuseStale = false
	_, v := Check(r, limits)
	require.NotNil(t, v)
	t.Log(v.Error())
}

// Without rule 4's compare, a clear loses to nothing: an enqueue that
// wrote ahead since the report is cleared over.
func TestWithoutCompareAndClearLiveWorkIsHidden(t *testing.T) {
	r := Full()
	r.CompareAndClear = false
	_, v := Check(r, limits)
	require.NotNil(t, v)
	t.Log(v.Error())
}

// Adoption is not what keeps the rules safe (safety holds without it), but
// it is what clears a hint an enqueue wrote and never landed under.
func TestAdoptionClearsAnAbandonedHint(t *testing.T) {
	require.True(t, ClearsAnAbandonedHint(Full()))
	noAdopt := Full()
	noAdopt.Adopt = false
	require.False(t, ClearsAnAbandonedHint(noAdopt), "without adoption the hint stays live for good")
	_, v := Check(noAdopt, limits)
	require.Nil(t, v)
}

func TestLimitsBeyondTheModelPanic(t *testing.T) {
	require.Panics(t, func() { Check(Full(), Limits{Enqueues: MaxEnqueues + 1}) })
}
