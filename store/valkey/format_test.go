package valkey

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
)

// openFormatStore opens a store the way relayd does, on a fresh prefix of
// the shared server, and returns the options to open it again.
func openFormatStore(t *testing.T) (*Store, Options) {
	t.Helper()
	srv := valkeytest.Shared(t)
	o := Options{Addrs: srv.Addrs, KeyPrefix: valkeytest.Prefix(t)}
	s, err := New(t.Context(), o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, o
}

func readMarker(t *testing.T, s *Store) string {
	t.Helper()
	v, err := s.client.Do(t.Context(), s.client.B().Get().Key(FormatKey(s.prefix)).Build()).ToString()
	require.NoError(t, err)
	return v
}

// TestFormatMarkerWrittenOnFreshOpen: the first open of an empty keyspace
// records this code's format, in the prefix's slot.
func TestFormatMarkerWrittenOnFreshOpen(t *testing.T) {
	s, _ := openFormatStore(t)
	require.Equal(t, recordFormat, readMarker(t, s))
	require.Equal(t, s.prefix+"format", FormatKey(s.prefix), "the marker carries the prefix's hash tag")
}

// TestFormatTwoOpensAgree: a second replica opening the same keyspace
// finds the marker, accepts it and leaves it as it was; the marker
// survives the first store closing and keeps serving the keyspace.
func TestFormatTwoOpensAgree(t *testing.T) {
	first, o := openFormatStore(t)
	second, err := New(t.Context(), o)
	require.NoError(t, err)
	require.Equal(t, recordFormat, readMarker(t, second))
	mustEnqueue(t, second, "a")
	require.NoError(t, second.Close())

	third, err := New(t.Context(), o)
	require.NoError(t, err)
	defer third.Close()
	require.Equal(t, recordFormat, readMarker(t, first), "the marker survives a store closing")
	require.Len(t, mustClaim(t, third, "r1", 1), 1, "a reopened store serves the keyspace")
}

// TestFormatOpenRefusesAnUnreadableMarker: a keyspace marked with a newer
// or an unparseable format is not opened, and the error names both
// formats; the marker is left untouched for the newer relays.
func TestFormatOpenRefusesAnUnreadableMarker(t *testing.T) {
	for _, marker := range []string{"3", "junk", "0", "01", "0x3", " 1"} {
		t.Run(marker, func(t *testing.T) {
			s, o := openFormatStore(t)
			require.NoError(t, s.client.Do(t.Context(), s.client.B().Set().Key(FormatKey(s.prefix)).Value(marker).Build()).Error())

			refused, err := New(t.Context(), o)
			require.Nil(t, refused)
			require.ErrorContains(t, err, `record format "`+marker+`"`)
			require.ErrorContains(t, err, `record format "`+recordFormat+`"`)
			require.ErrorContains(t, err, "refusing to start")
			require.Equal(t, marker, readMarker(t, s), "a refused open does not rewrite the marker")
		})
	}
}

// TestFormatOlderMarkerIsRaised: a marker naming format "1" (a keyspace
// this code migrates) lets the store open, which raises it to this code's
// format, so relays too old to read format "2" are kept out from then on.
func TestFormatOlderMarkerIsRaised(t *testing.T) {
	s, o := openFormatStore(t)
	require.NoError(t, s.client.Do(t.Context(), s.client.B().Set().Key(FormatKey(s.prefix)).Value(legacyFormat).Build()).Error())
	again, err := New(t.Context(), o)
	require.NoError(t, err)
	defer again.Close()
	require.Equal(t, recordFormat, readMarker(t, again))
}
