//go:build race

package valkey

// raceEnabled: the race detector slows the store's Go side several times
// over; a test that only repeats another on a second engine runs in the
// non-race pass instead (see TestContractRedis).
const raceEnabled = true
