package metrics_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/metrics"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
)

// TestEveryOperationIsLabelledWithItsOp calls each store operation once
// through the decorator and finds one latency series per store.Op.
func TestEveryOperationIsLabelledWithItsOp(t *testing.T) {
	m := metrics.New()
	st := m.InstrumentStore(memory.New(clock.NewManual(time.Now())))
	ctx := context.Background()
	_, _ = st.Now(ctx)
	_, _ = st.Enqueue(ctx, store.EnqueueInput{})
	_, _ = st.Claim(ctx, store.ClaimInput{})
	_, _ = st.SettleGrants(ctx, store.SettleGrantsInput{})
	_, _ = st.Fetch(ctx, store.LeaseInput{})
	_, _ = st.Result(ctx, store.ResultInput{})
	_, _ = st.Release(ctx, store.ReleaseInput{})
	_ = st.Payload(ctx, store.PayloadInput{})
	_, _ = st.Cancel(ctx, store.CancelInput{})
	_, _ = st.CancelRequests(ctx, store.CancelRequestsInput{RunnerID: "r"})
	_, _ = st.Renew(ctx, store.RenewInput{})
	_, _ = st.Pair(ctx, store.PairInput{})
	_, _ = st.Touch(ctx, store.TouchInput{RunnerID: "r"})
	_, _ = st.Heartbeat(ctx, store.HeartbeatInput{RunnerID: "r"})
	_, _ = st.Sweep(ctx)
	_, _, _ = st.Job(ctx, "s", "j")
	_, _ = st.Jobs(ctx, 0)
	_, _ = st.JobSummaries(ctx, 0)
	_, _ = st.Pending(ctx, "s")
	_, _ = st.Results(ctx, "s")
	_, _, _ = st.Presence(ctx, "r")
	_, _ = st.Runners(ctx, 0)
	_ = st.Ping(ctx)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	got := strings.Count(string(body), "relayd_store_operation_duration_seconds_count{")
	if got != len(store.Ops()) {
		t.Errorf("%d latency series, want one per op (%d)", got, len(store.Ops()))
	}
	for _, op := range store.Ops() {
		if !strings.Contains(string(body), `relayd_store_operation_duration_seconds_count{op="`+string(op)+`"} 1`) {
			t.Errorf("no single observation labelled %s", op)
		}
	}
}
