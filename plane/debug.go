package plane

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// debugLimit bounds how many jobs and devices the debug page lists, so a
// large store cannot make the page expensive.
const debugLimit = 500

var stateColours = map[store.State]string{
	store.Queued:          "#8a8a8a",
	store.AwaitingPayload: "#c98a00",
	store.Ready:           "#0a7",
	store.Running:         "#06c",
	store.Done:            "#444",
}

// escapeHTML escapes the four characters the reference escapes.
var escapeHTML = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace

// serveDebug renders the debug page (section E): jobs and presence, with no
// lease ids, envelopes or ciphertexts. It does not sweep.
func (r *Relay) serveDebug(c echo.Context) error {
	ctx := c.Request().Context()
	jobs, err := r.cfg.Store.JobSummaries(ctx, debugLimit)
	if err != nil {
		return codec.Failed(store.OpJobSummaries, err)
	}
	people, err := r.cfg.Store.Runners(ctx, debugLimit)
	if err != nil {
		return codec.Failed(store.OpRunners, err)
	}
	now := r.nowMs()
	proj := r.projection()

	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="1"><title>byollm relay — debug</title><style>` +
		`body{font:14px system-ui,sans-serif;margin:2em;color:#222;background:#fff}table{border-collapse:collapse;margin-bottom:2em}` +
		`th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f3f3f3}.note{color:#666}` +
		`@media (prefers-color-scheme: dark){body{color:#ddd;background:#111}th{background:#222}th,td{border-color:#444}}` +
		`</style></head><body><h1>byollm relay — debug</h1>` +
		`<p class="note">This relay routes sealed jobs. It holds no prompt or result text: payloads and results are ciphertext it cannot open.</p>`)

	b.WriteString("<h2>Routed jobs (" + strconv.Itoa(len(jobs)) + ")</h2><table><tr><th>job id</th><th>kind</th><th>owner</th><th>audience</th><th>size</th><th>stream</th><th>state</th><th>claimed by</th><th>payload</th><th>result</th></tr>")
	if len(jobs) == 0 {
		b.WriteString(`<tr><td colspan="10">nothing routed yet</td></tr>`)
	}
	for _, j := range jobs {
		state := `<b style="color:` + stateColours[j.State] + `">` + escapeHTML(string(j.State)) + `</b>`
		if j.State == store.AwaitingPayload {
			state += " " + strconv.FormatInt(max(0, j.AwaitingUntil-now), 10) + "ms left"
		}
		claimedBy := "—"
		if j.ClaimedBy != nil {
			if id, ok := protocol.KeyIDOf(j.ClaimedBy.Device.Identity); ok {
				claimedBy = id
			}
		}
		result := "—"
		if j.ResultBytes > 0 {
			result = j.Disposition
			if result == "" {
				result = "?"
			}
		}
		cells := []string{escapeHTML(j.ID), escapeHTML(j.Stub.Kind), escapeHTML(j.Stub.Owner), escapeHTML(j.Stub.Audience),
			escapeHTML(j.Stub.SizeClass), yesNo(j.Stub.Streaming), state, escapeHTML(claimedBy), sealedOrDash(j.PayloadBytes > 0), escapeHTML(result)}
		b.WriteString("<tr><td>" + strings.Join(cells, "</td><td>") + "</td></tr>")
	}
	b.WriteString("</table>")

	b.WriteString("<h2>Presence (" + strconv.Itoa(len(people)) + ")</h2><table><tr><th>runner id</th><th>owner</th><th>fingerprint</th><th>last seen</th><th>routing</th></tr>")
	if len(people) == 0 {
		b.WriteString(`<tr><td colspan="5">no devices connected</td></tr>`)
	}
	for _, p := range people {
		fingerprint, _ := protocol.KeyIDOf(p.Device.Identity)
		routing := `<b style="color:#c00">no consent</b>`
		if _, ok := proj.ConsentFor(p.Owner, r.cfg.SiteID); ok {
			routing = "active"
		}
		cells := []string{escapeHTML(p.RunnerID), escapeHTML(p.Owner), escapeHTML(fingerprint),
			strconv.FormatInt(max(0, now-p.LastSeenAt), 10) + "ms ago", routing}
		b.WriteString("<tr><td>" + strings.Join(cells, "</td><td>") + "</td></tr>")
	}
	b.WriteString("</table></body></html>")

	c.Response().Header().Set(echo.HeaderContentType, "text/html; charset=utf-8")
	c.Response().WriteHeader(http.StatusOK)
	_, err = c.Response().Write([]byte(b.String()))
	return err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func sealedOrDash(sealed bool) string {
	if sealed {
		return "sealed"
	}
	return "—"
}
