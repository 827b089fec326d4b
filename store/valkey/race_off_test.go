//go:build !race

package valkey

const raceEnabled = false
