package peer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/nodetest"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// exchange is one request and its answer, as they crossed the socket.
type exchange struct {
	endpoint string // "claim", "pair", "site/enqueue", …
	request  []byte
	status   int
	response []byte
}

// recorder is an http.RoundTripper that keeps every exchange.
type recorder struct {
	mu   sync.Mutex
	seen []exchange
}

func (rec *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	endpoint := req.URL.Path[strings.LastIndexByte(req.URL.Path, '/')+1:]
	if strings.HasPrefix(req.URL.Path, peer.SitePathPrefix) {
		endpoint = "site/" + endpoint
	}
	rec.mu.Lock()
	rec.seen = append(rec.seen, exchange{endpoint: endpoint, request: body, status: resp.StatusCode, response: out})
	rec.mu.Unlock()
	return resp, nil
}

func (rec *recorder) exchanges() []exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]exchange(nil), rec.seen...)
}

// v2Relay is one relayd on the memory store serving both protocols, with
// two sites that alice consents to, one device listed in the fixture and
// device-code pairing on.
type v2Relay struct {
	fleet        *fleet.Fleet
	fixture      string
	doc          *projection.Fixture
	siteA, siteB peer.Keys
	listed       peer.DemoDevice
}

func startV2Relay(t *testing.T) *v2Relay {
	t.Helper()
	r := &v2Relay{doc: projection.Empty(), fixture: filepath.Join(t.TempDir(), "fixture.json")}
	var err error
	for _, k := range []*peer.Keys{&r.siteA, &r.siteB} {
		*k, err = peer.GenerateKeys()
		require.NoError(t, err)
	}
	listedKeys, err := peer.GenerateKeys()
	require.NoError(t, err)
	r.listed = peer.DemoDevice{RunnerID: "runner_listed", Owner: "alice", Keys: listedKeys}
	r.doc.Sites = []projection.SiteRecord{{SiteID: "site_a", Site: r.siteA.Public()}, {SiteID: "site_b", Site: r.siteB.Public()}}
	r.doc.Consents = []projection.ConsentRecord{{Owner: "alice", SiteID: "site_a"}, {Owner: "alice", SiteID: "site_b"}}
	r.doc.Devices = []projection.DeviceRecord{{Owner: "alice", RunnerID: r.listed.RunnerID, Device: listedKeys.Public()}}
	r.write(t)
	r.fleet = fleet.StartForTest(t, fleet.Options{
		Fixture: r.fixture, SiteID: "site_a",
		Args: []string{"--protocols", "0,2", "--verification-url", "https://example.test/activate", "--fixture-poll", "100ms"},
	})
	return r
}

func (r *v2Relay) write(t *testing.T) {
	t.Helper()
	raw, err := json.MarshalIndent(r.doc, "", "  ")
	require.NoError(t, err)
	tmp := r.fixture + ".tmp"
	require.NoError(t, os.WriteFile(tmp, raw, 0o600))
	require.NoError(t, os.Rename(tmp, r.fixture))
}

// approve plays the control plane: it looks the user code up on the admin
// listener and writes the device it names into the fixture for owner.
func (r *v2Relay) approve(t *testing.T, owner, runnerID string) func(context.Context, proto2.PairStartResponse) error {
	return func(ctx context.Context, start proto2.PairStartResponse) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.fleet.Replica(0).AdminURL()+"/pairings/"+start.UserCode, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var pending struct{ Device protocol.PublicIdentity }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&pending))
		r.doc.Devices = append(r.doc.Devices, projection.DeviceRecord{Owner: owner, RunnerID: runnerID, Device: pending.Device})
		r.write(t)
		return nil
	}
}

func echoRun(p json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"echo":` + string(p) + `}`), nil
}

// The "2" daemon and site against a real relayd: a daemon paired by the
// device-code flow and one listed in the fixture; two sites publishing the
// same job id, each job claimed, sealed, run and collected by its own site
// only; a release, a lost lease, and no "2" job offered to a "0" daemon.
// Every body either side sent, and every answer with a published schema,
// is then checked against the published @byollm/protocol 0.1.1 schemas.
func TestDaemon2AndSite2AgainstRelayd(t *testing.T) {
	ctx := t.Context()
	r := startV2Relay(t)
	rec := &recorder{}
	cfg := peer.Config{BaseURLs: []string{r.fleet.Replica(0).PublicURL()}, HTTPClient: &http.Client{Transport: rec, Timeout: 10 * time.Second}, PollInterval: 10 * time.Millisecond}

	newcomerKeys, err := peer.GenerateKeys()
	require.NoError(t, err)
	newcomer, err := peer.NewDaemon2(cfg, newcomerKeys, "")
	require.NoError(t, err)
	approved, err := newcomer.PairDeviceCode(ctx, "laptop", r.approve(t, "alice", "runner_newcomer"))
	require.NoError(t, err)
	require.Equal(t, "runner_newcomer", approved.RunnerID)
	require.Equal(t, "alice", newcomer.Owner())
	requireSites(t, newcomer, r.siteA, r.siteB)

	listed, err := peer.NewDaemon2(cfg, r.listed.Keys, "")
	require.NoError(t, err)
	paired, err := listed.PairFixture(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, r.listed.RunnerID, paired.RunnerID)
	requireSites(t, listed, r.siteA, r.siteB)

	siteA, err := peer.NewSite2(cfg, r.siteA, "site_a")
	require.NoError(t, err)
	siteB, err := peer.NewSite2(cfg, r.siteB, "site_b")
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Minute).UnixMilli()
	for _, s := range []*peer.Site2{siteA, siteB} {
		queued, err := s.Enqueue(ctx, s.Stub("same-id", protocol.KindGenerate, "alice", deadline))
		require.NoError(t, err)
		require.Equal(t, "queued", queued.State)
	}

	// A "0" daemon of the same device is offered neither "2" job.
	v0, err := peer.NewDaemon(cfg, r.listed.Keys, r.listed.RunnerID)
	require.NoError(t, err)
	none, err := v0.Claim(ctx, []string{protocol.KindGenerate}, 8)
	require.NoError(t, err)
	require.Empty(t, none.Jobs)

	workBothSites(t, listed, siteA, siteB)

	// The device-code daemon takes a job and gives it back; a lease it
	// does not hold is reported lost.
	_, err = siteA.Enqueue(ctx, siteA.Stub("given-back", protocol.KindGenerate, "alice", deadline))
	require.NoError(t, err)
	got, err := newcomer.Claim(ctx, []string{protocol.KindGenerate}, 1)
	require.NoError(t, err)
	require.Len(t, got.Jobs, 1)
	released, err := newcomer.Release(ctx, []protocol.LeaseRef{{JobID: "given-back", LeaseID: got.Jobs[0].Lease.ID}}, protocol.ReasonShutdown)
	require.NoError(t, err)
	require.Equal(t, []string{"given-back"}, released.Released)
	bogus := protocol.LeaseRef{JobID: "given-back", LeaseID: got.Jobs[0].Lease.ID}
	hb, err := newcomer.Heartbeat(ctx, []protocol.LeaseRef{bogus})
	require.NoError(t, err)
	require.Equal(t, []protocol.LeaseRef{bogus}, hb.Lost)
	require.Len(t, hb.Sites, 2)

	requirePublishedSchemasAccept(t, rec.exchanges())
}

// workBothSites has d claim the two sites' "same-id" jobs, each site seal
// its own, d run both, and each site collect only its own result.
func workBothSites(t *testing.T, listed *peer.Daemon2, siteA, siteB *peer.Site2) {
	t.Helper()
	ctx := t.Context()
	claimed, err := listed.Claim(ctx, []string{protocol.KindGenerate}, 8)
	require.NoError(t, err)
	require.Len(t, claimed.Jobs, 2, "one job of each site, under the same id")
	sitesOf := map[string]*peer.Site2{siteA.Keys().KeyID(): siteA, siteB.Keys().KeyID(): siteB}
	var wg sync.WaitGroup
	for _, job := range claimed.Jobs {
		require.Equal(t, "same-id", job.ID)
		site := sitesOf[job.Site]
		require.NotNil(t, site, "the stub names one of the two sites")
		wg.Go(func() {
			pending, err := site.AwaitPending(ctx, job.ID)
			require.NoError(t, err)
			require.Equal(t, job.Lease.ID, pending.LeaseID)
			_, err = site.SendPayload(ctx, pending, job.DeadlineAt, json.RawMessage(`{"for":"`+site.SiteID()+`"}`))
			require.NoError(t, err)
		})
		ran, err := listed.Work(ctx, job, echoRun, peer.Steps{})
		require.NoError(t, err)
		require.True(t, ran.Response.Accepted)
		require.JSONEq(t, `{"for":"`+site.SiteID()+`"}`, string(ran.Payload), "each site's payload reached the job of that site")
	}
	wg.Wait()
	for _, s := range []*peer.Site2{siteA, siteB} {
		fin, err := s.AwaitResult(ctx, "same-id")
		require.NoError(t, err)
		plain, err := s.OpenResult(fin)
		require.NoError(t, err)
		require.JSONEq(t, `{"echo":{"for":"`+s.SiteID()+`"}}`, string(plain))
		listing, err := s.Results(ctx)
		require.NoError(t, err)
		require.Len(t, listing.Jobs, 1, "a site lists only its own result")
	}

}

func requireSites(t *testing.T, d *peer.Daemon2, want ...peer.Keys) {
	t.Helper()
	sites := d.Sites()
	require.Len(t, sites, len(want))
	for _, k := range want {
		got, ok := d.SiteFor(k.KeyID())
		require.True(t, ok, "site %s pinned", k.KeyID())
		require.Equal(t, k.Public(), got)
	}
}

// schemaOf names the published schema of a recorded request, and of its
// answer ("" where none is published: the fixture pair answer, the
// site-plane answers and their refusals).
func schemaOf(x exchange) (request, response string) {
	request = x.endpoint
	daemonPlane := !strings.HasPrefix(x.endpoint, "site/")
	switch {
	case x.status < 200 || x.status > 299:
		if daemonPlane {
			response = "error"
		}
	case x.endpoint == "pair":
		var body struct{ Action string }
		_ = json.Unmarshal(x.request, &body)
		if body.Action != "" {
			response = "pair/" + body.Action + " response"
		}
	case daemonPlane:
		response = x.endpoint + " response"
	}
	return request, response
}

// requirePublishedSchemasAccept runs every recorded "2" body through the
// published zod schemas (protocol/proto2's differential oracle) and
// requires each to pass. "0" requests are left out.
func requirePublishedSchemasAccept(t *testing.T, seen []exchange) {
	t.Helper()
	interop := nodetest.Interop(t, "@byollm/protocol")
	type check struct {
		Schema string `json:"s"`
		Body   string `json:"b"`
	}
	var checks []check
	for _, x := range seen {
		if len(x.request) > 0 && !bytes.Contains(x.request, []byte(`"protocolVersion":"2"`)) {
			continue
		}
		req, resp := schemaOf(x)
		if len(x.request) > 0 {
			checks = append(checks, check{req, string(x.request)})
		}
		if resp != "" {
			checks = append(checks, check{resp, string(x.response)})
		}
	}
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, c := range checks {
		require.NoError(t, enc.Encode(c))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("..", "..", "protocol", "proto2", "testdata", "zodcheck.mjs"), interop)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node: %s", stderr.String())
	verdicts := strings.Fields(string(out))
	require.Len(t, verdicts, len(checks))
	schemas := map[string]int{}
	for i, c := range checks {
		require.Equal(t, "1", verdicts[i], "the published %q schema refuses %s", c.Schema, c.Body)
		schemas[c.Schema]++
	}
	t.Logf("%d bodies accepted by the published schemas: %v", len(checks), schemas)
	for _, want := range []string{"pair", "claim", "fetch", "result", "heartbeat", "release", "site/enqueue", "site/payload",
		"pair/start response", "pair/poll response", "claim response", "fetch response", "result response", "heartbeat response", "release response"} {
		require.Positive(t, schemas[want], "some %s was checked", want)
	}
}
