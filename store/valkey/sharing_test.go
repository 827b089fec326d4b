package valkey

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/store"
)

// Stores opened on one client under different hash tags share the client
// and nothing else: a job enqueued under one prefix is not under another.
func TestStoresSharingAClientKeepTheirKeysApart(t *testing.T) {
	srv := valkeytest.Shared(t)
	base := valkeytest.Prefix(t)
	prefixes := []string{base[:len(base)-1] + "a:", "sharing:{" + t.Name() + "-b}:"}
	stores, closeAll, err := NewSharing(t.Context(), Options{Addrs: srv.Addrs, Cluster: srv.Cluster}, prefixes)
	require.NoError(t, err)
	t.Cleanup(closeAll)
	require.Len(t, stores, 2)
	a, b := stores[0], stores[1]
	st := testStub(t, a, "shared-1")
	_, err = a.Enqueue(t.Context(), store.EnqueueInput{SiteID: testSite, Stub: st})
	require.NoError(t, err)
	_, ok, err := a.Job(t.Context(), testSite, st.ID)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = b.Job(t.Context(), testSite, st.ID)
	require.NoError(t, err)
	require.False(t, ok, "another prefix holds none of it")

	_, _, err = NewSharing(t.Context(), Options{Addrs: srv.Addrs, Cluster: srv.Cluster}, []string{"no-tag:"})
	require.ErrorContains(t, err, "hash tag")
}
