//go:build !race

package replicas_test

const raceEnabled = false
