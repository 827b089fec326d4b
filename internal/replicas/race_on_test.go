//go:build race

package replicas_test

// raceEnabled: the race detector slows this test process (the site and the
// daemons, whose sealing is CPU work) about fivefold; relayd itself is
// built without it.
const raceEnabled = true
