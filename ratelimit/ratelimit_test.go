package ratelimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseEvery(t *testing.T) {
	for text, want := range map[string]time.Duration{
		"50/s": 20 * time.Millisecond, "50": 20 * time.Millisecond, " 2/s ": 500 * time.Millisecond,
		"600/m": 100 * time.Millisecond, "1/h": time.Hour, "0.5/s": 2 * time.Second, "3/s": 333333333,
		"0": 0, "0/s": 0, "1000000/s": time.Microsecond,
	} {
		got, err := ParseEvery(text)
		require.NoError(t, err, text)
		require.Equal(t, want, got, text)
	}
	for _, bad := range []string{"", "fast", "-1/s", "50/d", "50/", "/s", "NaN", "Inf/s", "2000000/s", "1e400/s"} {
		_, err := ParseEvery(bad)
		require.Error(t, err, bad)
	}
}

func TestFormatEveryReadsBack(t *testing.T) {
	for every, want := range map[time.Duration]string{
		0: "0", 20 * time.Millisecond: "50/s", time.Second: "1/s", 2 * time.Second: "30/m",
		7 * time.Second: "0.14285714285714285/s", time.Hour: "1/h", 90 * time.Minute: "0.00018518518518518518/s",
	} {
		require.Equal(t, want, FormatEvery(every))
		back, err := ParseEvery(want)
		require.NoError(t, err)
		require.Equal(t, every, back, want)
	}
	require.Equal(t, "50/s burst 100", Rate{Every: 20 * time.Millisecond, Burst: 100}.String())
}
