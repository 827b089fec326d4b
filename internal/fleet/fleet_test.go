package fleet_test

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/projection"
)

func TestWriteFixture_KeysMatchTheFixtureAndSparesStandApart(t *testing.T) {
	fx, err := fleet.WriteFixture(t.TempDir(), fleet.FixtureOptions{Devices: 6, Owners: 2, Spares: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"owner000", "owner001"}, fx.Owners)
	require.Len(t, fx.Keys.Devices, 8)
	require.Len(t, fx.Pool().Devices, 6)
	require.Len(t, fx.DevicesOf("owner001"), 3)
	require.Equal(t, "spare001", fx.Spares[1].Owner)

	loaded, err := peer.LoadDemoKeys(fx.KeysPath)
	require.NoError(t, err)
	require.Equal(t, fx.SiteID, loaded.Site.SiteID)
	require.Len(t, loaded.Devices, 8)
	for i, d := range loaded.Devices {
		require.Equal(t, fx.Keys.Devices[i].RunnerID, d.RunnerID)
		require.Equal(t, fx.Keys.Devices[i].Keys.Public(), d.Keys.Public())
	}
}

func TestWriteFixture_ExtraSitesShareEveryConsent(t *testing.T) {
	fx, err := fleet.WriteFixture(t.TempDir(), fleet.FixtureOptions{Devices: 2, Owners: 2, Spares: 1, ExtraSites: 2})
	require.NoError(t, err)
	require.Len(t, fx.ExtraSites, 2)
	raw, err := os.ReadFile(fx.Path)
	require.NoError(t, err)
	doc, err := projection.Parse(raw)
	require.NoError(t, err)
	sites := []string{fx.SiteID, fx.ExtraSites[0].SiteID, fx.ExtraSites[1].SiteID}
	var registered []string
	for _, s := range doc.Sites {
		registered = append(registered, s.SiteID)
	}
	require.Equal(t, sites, registered)
	require.Equal(t, fx.ExtraSites[1].Keys.Public(), doc.Sites[2].Site)
	consents := map[string]int{}
	for _, c := range doc.Consents {
		consents[c.Owner]++
	}
	require.Equal(t, map[string]int{"owner000": 3, "owner001": 3, "spare000": 3}, consents, "every owner consents to every site")
}

func TestFleet_RestartsOnTheSameAddressAndDrainsOnStop(t *testing.T) {
	fx, err := fleet.WriteFixture(t.TempDir(), fleet.FixtureOptions{Devices: 1})
	require.NoError(t, err)
	f := fleet.StartForTest(t, fleet.Options{Fixture: fx.Path, SiteID: fx.SiteID})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := f.Replica(0)
	public, pid := r.PublicURL(), r.Process().PID()

	require.NoError(t, r.Kill())
	require.False(t, r.Running())
	require.NoError(t, r.Restart(ctx))
	require.Equal(t, public, r.PublicURL(), "a restart comes back where clients expect it")
	require.NotEqual(t, pid, r.Process().PID())
	status, _, err := r.Readiness(ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	require.NoError(t, r.Stop(ctx), "SIGTERM drains and exits cleanly")
	require.Contains(t, r.Logs(), "----- restarted -----")
	require.Contains(t, r.Logs(), `"msg":"stopped"`)
}

func TestFleet_RefusesToShareTheMemoryStore(t *testing.T) {
	_, err := fleet.Start(context.Background(), fleet.Options{Binary: "relayd", Replicas: 2, Fixture: "f.json", SiteID: "s"})
	require.ErrorContains(t, err, "memory store")
}
