package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/internal/leaktest"
	"github.com/byollm/relayd/projection"
)

// Each loop startLoops starts ends with its context, whatever it is doing
// then: the fixture watcher (its file watch and poll ticker), the reload
// loop just after a reload, and the sweeper in the middle of a backlog it
// could never drain. A sweeper that finished its backlog before looking at
// its context would still be running at the check, which fails naming it.
func TestStartLoopsEachEndWithTheirContext(t *testing.T) {
	leaktest.Check(t)
	fixture, err := os.ReadFile("../deploy/fixture.example.json")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "fixture.json")
	require.NoError(t, os.WriteFile(path, fixture, 0o600))
	src, err := projection.Open(t.Context(), projection.Options{Path: path, Logger: quietLogger(), PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)

	draining := make(chan struct{})
	st := &backlogStore{backlog: 1 << 40, batch: 1, onSweep: func(call int) error {
		if call == 3 {
			close(draining)
		}
		return nil
	}}
	reload := make(chan struct{})
	bg, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	startLoops(bg, config.Config{SweepInterval: 10 * time.Millisecond}, st, src, Hooks{Reload: reload}, quietLogger())

	reload <- struct{}{} // unbuffered: the reload loop has taken it
	<-draining           // the sweeper is in its backlog
	stop()
	backlog, _ := st.state()
	require.Positive(t, backlog, "the backlog is far too deep to drain before the check")
}
