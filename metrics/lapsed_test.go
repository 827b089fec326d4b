package metrics_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/byollm/relayd/metrics"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
)

// lapsingStore reports two lapsed sealing windows on every sweep.
type lapsingStore struct{ store.RoutingStore }

func (lapsingStore) Sweep(context.Context) (store.SweepResult, error) {
	return store.SweepResult{Requeued: []string{"a"}, Expired: []string{"b"}, Lapsed: []string{"a", "b"}}, nil
}

// Decision P2-D6: every sealing window a sweep saw lapse is counted.
func TestP2_D6_SealingWindowLapsesAreCounted(t *testing.T) {
	m := metrics.New()
	st := m.InstrumentStore(lapsingStore{memory.New(nil)})
	for range 2 {
		_, err := st.Sweep(context.Background())
		if err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if !strings.Contains(string(body), "\nrelayd_sweep_sealing_lapsed_total 4\n") {
		t.Errorf("want 4 lapses counted, got:\n%s", body)
	}
}
