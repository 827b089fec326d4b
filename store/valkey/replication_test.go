package valkey

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// TestWaitReplicasHoldsTheAnswerUntilAReplicaHasTheWrite: with
// WaitReplicas 1 on a primary without a replica, a write runs but is never
// confirmed, so the call fails as an outage, retried until its deadline;
// once a replica follows the primary, the retried call is confirmed and
// answers what the first run answered, and the replica has the job.
func TestWaitReplicasHoldsTheAnswerUntilAReplicaHasTheWrite(t *testing.T) {
	primary := valkeytest.Start(t)
	replica := valkeytest.Start(t)
	prefix := valkeytest.Prefix(t)
	var unreplicated atomic.Int64
	st, err := New(t.Context(), Options{Addrs: primary.Addrs, KeyPrefix: prefix, WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond,
		OnRetry: func(_ store.Op, cause string) {
			if cause == causeUnreplicated {
				unreplicated.Add(1)
			}
		}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	in := store.EnqueueInput{SiteID: "site-wait", Stub: protocol.JobStub{ID: "job-1", Kind: protocol.KindGenerate, Owner: "owner",
		Site: "site-key", Audience: protocol.AudiencePublic, SizeClass: "small", DeadlineAt: time.Now().Add(time.Hour).UnixMilli()}}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = st.Enqueue(ctx, in)
	require.Error(t, err, "no replica confirmed the write")
	require.GreaterOrEqual(t, unreplicated.Load(), int64(2), "the unconfirmed write was retried as an outage")
	_, found, err := st.Job(t.Context(), "site-wait", "job-1")
	require.NoError(t, err)
	require.True(t, found, "the write ran on the primary")

	host, portText, err := net.SplitHostPort(primary.Addrs[0])
	require.NoError(t, err)
	port, err := strconv.ParseInt(portText, 10, 64)
	require.NoError(t, err)
	rc := replica.Client(t)
	require.NoError(t, rc.Do(t.Context(), rc.B().Replicaof().Host(host).Port(port).Build()).Error())
	require.Eventually(t, func() bool {
		_, err := st.Enqueue(t.Context(), in)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "a retry is confirmed once a replica follows")
	n, err := rc.Do(t.Context(), rc.B().Exists().Key(prefix+keySuffix("job")).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the replica holds the job")
}
