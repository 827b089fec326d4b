package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseStoresKeepsOrderAndRefusesWhatCannotRun: the targets run in the
// order named; an unknown, repeated, or server-less valkey target is an
// error, never a silent skip; no list keeps the old default.
func TestParseStoresKeepsOrderAndRefusesWhatCannotRun(t *testing.T) {
	got, err := parseStores("reference, memory,valkey", "127.0.0.1:6379")
	require.NoError(t, err)
	require.Equal(t, []string{"reference", "memory", "valkey"}, got)

	got, err = parseStores("", "")
	require.NoError(t, err)
	require.Equal(t, []string{"memory"}, got)
	got, err = parseStores(" ", "127.0.0.1:6379")
	require.NoError(t, err)
	require.Equal(t, []string{"memory", "valkey"}, got)

	for list, want := range map[string]string{
		"memory,redis":               `unknown target "redis"`,
		"reference,memory,reference": `"reference" named twice`,
		"reference,valkey":           "no --valkey-addr",
	} {
		_, err := parseStores(list, "")
		require.ErrorContains(t, err, want, list)
	}
}
