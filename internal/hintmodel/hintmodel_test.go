package hintmodel

import (
	"testing"

	"github.com/stretchr/testify/require"
)

var limits = Limits{Enqueues: 3, Retries: 2, Claims: 2}

// The rules as designed: no interleaving of three enqueues (each may be
// refused and retry, or give up after writing ahead), their jobs
// finishing, two claims and the clears of every report (each may be lost)
// leaves the route with live work under a cleared hint.
func TestTheDesignedRulesNeverHideLiveWork(t *testing.T) {
	n, v := Check(Full, limits)
	require.Nil(t, v)
	t.Logf("%d states explored", n)
	require.Greater(t, n, 1000, "the exploration covered a real state space")
}

// Without rule 2 a late enqueue lands under a generation a clear already
// used, so live work sits under a cleared hint: the checker finds it.
func TestWithoutRefusingStaleGenerationsLiveWorkIsHidden(t *testing.T) {
	r := Full
	r.RefuseStale = false
	_, v := Check(r, limits)
	require.NotNil(t, v)
	t.Log(v.Error())
}

// Without rule 4's compare, a clear loses to nothing: an enqueue that
// wrote ahead since the report is cleared over.
func TestWithoutCompareAndClearLiveWorkIsHidden(t *testing.T) {
	r := Full
	r.CompareAndClear = false
	_, v := Check(r, limits)
	require.NotNil(t, v)
	t.Log(v.Error())
}

// Adoption is not what keeps the rules safe (safety holds without it), but
// it is what clears a hint an enqueue wrote and never landed under.
func TestAdoptionClearsAnAbandonedHint(t *testing.T) {
	require.True(t, ClearsAnAbandonedHint(Full))
	noAdopt := Full
	noAdopt.Adopt = false
	require.False(t, ClearsAnAbandonedHint(noAdopt), "without adoption the hint stays live for good")
	_, v := Check(noAdopt, limits)
	require.Nil(t, v)
}
