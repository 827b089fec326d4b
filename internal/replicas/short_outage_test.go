package replicas_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/internal/workload"
)

// Issue 23 item 6, end to end: a Valkey restart of about a second,
// shorter than the store deadline (2 s), under load on three replicas, reaches no client as a 503 (the
// workload counts any 503 a violation here), and every job completes.
// The published daemon drops a job whose fetch or result fails; before
// the store retried through the outage, such a restart answered some of
// the calls made during it with 503s.
func TestShortValkeyRestart_NoClientSeesA503(t *testing.T) {
	srv := valkeytest.StartWith(t, valkeytest.Options{Persist: true})
	if !srv.CanRestart() {
		t.Skip("this test restarts Valkey, which it cannot do to a server it did not start (VALKEY_ADDR)")
	}
	r := newRig(t, rigOptions{valkey: srv, fleet: fleet.Options{LeaseMs: 10_000, SweepInterval: 200 * time.Millisecond}})
	run := r.startWorkload(workload.Config{Jobs: faultJobs(t), StallTimeout: 60 * time.Second})
	require.NoError(t, run.WaitCollected(r.ctx, atPercent(run, 30)))
	start := time.Now()
	srv.Stop(t)
	// The outage's length, as the issue measured a clean restart (1.1 s):
	// a scenario, not a wait for anything.
	time.Sleep(time.Second)
	srv.Restart(t)
	t.Logf("Valkey was away for %v, at %+v", time.Since(start).Round(time.Millisecond), run.Progress())
	rep := requireClean(t, run)
	require.Zero(t, rep.Statuses[http.StatusServiceUnavailable], "no 503 reached a client")
}
