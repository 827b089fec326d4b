package plane_test

// Upstream's wire-errors cases (RB-F85–RB-F91): each refusal carries a named code
// and the status that goes with it.

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
)

func TestWireErrors_UnsignedClaimIsRefusedWithANamedCode(t *testing.T) { // RB-F85
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		b.paired(t, "alice")
		resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: claimBody(t, "runner_alice")})
		requireAnswer(t, resp, 401, bodyNotSigned)
	})
}

func TestWireErrors_StaleSiteReadIsNamedClockSkewAndCarriesTheServerClock(t *testing.T) { // RB-F86, RB-F87
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		h := b.site.SignHeadersAt("site/pending", nil, b.relayNow()-10*60_000)
		resp := b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/pending?siteId=" + siteMain, Header: h})
		requireAnswer(t, resp, 401, bodyClockSkew(b.relayNow()))

		var body protocol.ErrorBody
		require.NoError(t, json.Unmarshal(resp.Body, &body))
		require.Positive(t, body.ServerTime)
		require.EqualValues(t, 120000, body.MaxSkewMs)
	})
}

func TestWireErrors_FetchBeforeTheSealIsNotReady(t *testing.T) { // RB-F88, RB-A16 #16
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		_, err := d.Fetch(b.ctx, c.ID, c.Lease.ID)
		requireRefused(t, err, 409, bodyNotReady)
	})
}

func TestWireErrors_SiteAskingAboutAnotherSitesWorkIsForbidden(t *testing.T) { // RB-F89, RB-F48, RB-A16 #10
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		for _, route := range []string{"pending", "results"} {
			h := b.site.SignHeaders("site/"+route, nil)
			resp := b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/" + route + "?siteId=someone_else", Header: h})
			requireAnswer(t, resp, 403, bodyNotYourSite)
		}
	})
}

func TestWireErrors_DaemonWhoseOwnerNeverConsentedIsForbidden(t *testing.T) { // RB-F90, RB-A16 #19
	noConsents := func(f *projection.Fixture, _ keyring) { f.Consents = []projection.ConsentRecord{} }
	eachStore(t, &setupOpts{Fixture: []fixtureMod{noConsents}}, func(t *testing.T, b *bundle) {
		_, err := b.daemon(t, "alice").Pair(b.ctx, "alice")
		requireRefused(t, err, 403, bodyNoConsent)
	})
}

func TestWireErrors_RevokedIsItsOwnCodeNotFoldedIntoForbidden(t *testing.T) { // RB-F91, RB-A16 #7
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.project(t, withRevocation("alice"))
		resp, err := d.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
		require.NoError(t, err)
		requireAnswer(t, resp, 403, bodyRevoked)
	})
}
