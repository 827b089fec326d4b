package valkey

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// BenchmarkWaitReplicas is the cost of --valkey-wait-replicas 1: enqueues
// on a primary with one replica, through a store that waits for it and
// one that does not, paired in every iteration, one at a time (the
// latency a write pays) and 16 at once (where waits overlap).
//
//	go test ./store/valkey -run '^$' -bench BenchmarkWaitReplicas -benchtime 2000x -count 3
func BenchmarkWaitReplicas(b *testing.B) {
	primary := valkeytest.Start(b)
	replica := valkeytest.Start(b)
	host, portText, err := net.SplitHostPort(primary.Addrs[0])
	if err != nil {
		b.Fatal(err)
	}
	port, _ := strconv.ParseInt(portText, 10, 64)
	rc := replica.Client(b)
	if err := rc.Do(b.Context(), rc.B().Replicaof().Host(host).Port(port).Build()).Error(); err != nil {
		b.Fatal(err)
	}
	stores := map[int]*Store{}
	for _, wait := range []int{0, 1} {
		st, err := New(b.Context(), Options{Addrs: primary.Addrs, KeyPrefix: valkeytest.Prefix(b), WaitReplicas: wait, WaitTimeout: 2 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		stores[wait] = st
	}
	var seq atomic.Int64
	enqueue := func(b *testing.B, st *Store) {
		id := "job-" + strconv.FormatInt(seq.Add(1), 10)
		in := store.EnqueueInput{SiteID: "site-bench", Stub: protocol.JobStub{ID: id, Kind: protocol.KindGenerate, Owner: "owner",
			Site: "site-key", Audience: protocol.AudiencePublic, SizeClass: "small", DeadlineAt: time.Now().Add(time.Hour).UnixMilli()}}
		if _, err := st.Enqueue(b.Context(), in); err != nil {
			b.Fatal(err)
		}
	}
	// Each iteration enqueues once through each store, timing each, so
	// the two figures share the machine's moment and their ratio is fair.
	paired := func(b *testing.B, each func(func())) {
		var took [2]atomic.Int64
		each(func() {
			for wait := range 2 {
				start := time.Now()
				enqueue(b, stores[wait])
				took[wait].Add(int64(time.Since(start)))
			}
		})
		n := float64(b.N)
		b.ReportMetric(float64(took[0].Load())/n, "ns/write-nowait")
		b.ReportMetric(float64(took[1].Load())/n, "ns/write-wait1")
		b.ReportMetric(float64(took[1].Load())/float64(took[0].Load()), "wait1/nowait")
	}
	b.Run("serial", func(b *testing.B) {
		paired(b, func(pair func()) {
			for b.Loop() {
				pair()
			}
		})
	})
	b.Run("parallel16", func(b *testing.B) {
		b.SetParallelism(8) // 16 goroutines on the 2 cores
		paired(b, func(pair func()) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					pair()
				}
			})
		})
	})
}
