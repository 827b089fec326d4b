package projection_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol/strictjson"
)

// FuzzParseFixture feeds arbitrary documents to the fixture parser, whose
// verdict decides who may run whose jobs. It must never panic; a refusal
// returns no fixture; an acceptance must be valid, read the same as the
// strict request parser reads it (no lone surrogate turned into U+FFFD, no
// repeated key, no byte order mark), survive a round trip through its own
// JSON encoding, and answer every query about its own records as the
// first matching record says.
func FuzzParseFixture(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		fx, err := projection.Parse(data)
		if err != nil {
			if fx != nil {
				t.Fatalf("refused with %v, yet returned %+v", err, fx)
			}
			return
		}
		if err := fx.Validate(); err != nil {
			t.Fatalf("accepted an invalid fixture: %v", err)
		}
		if _, err := strictjson.Parse(data); err != nil {
			t.Fatalf("accepted a document the strict parser refuses: %v", err)
		}
		checkStrings(t, reflect.ValueOf(*fx))

		again, err := projection.Parse(mustMarshal(t, fx))
		if err != nil || !reflect.DeepEqual(again, fx) {
			t.Fatalf("does not survive a round trip: %+v, %v", again, err)
		}
		p, err := projection.FromJSON(data)
		if err != nil {
			t.Fatalf("Parse accepts what FromJSON refuses: %v", err)
		}
		checkQueries(t, p, fx)
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkStrings requires every string in v to be non-empty valid UTF-8.
func checkStrings(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" || !utf8.ValidString(v.String()) {
			t.Fatalf("string %q in an accepted fixture", v.String())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			checkStrings(t, v.Field(i))
		}
	case reflect.Slice:
		for i := range v.Len() {
			checkStrings(t, v.Index(i))
		}
	}
}

// checkQueries asks about every record and compares with a front-to-back
// scan of the fixture.
func checkQueries(t *testing.T, p *projection.Projection, fx *projection.Fixture) {
	t.Helper()
	for _, s := range fx.Sites {
		got, ok := p.SiteFor(s.SiteID)
		// DeepEqual, because a site record holds its succession chain.
		if !ok || !reflect.DeepEqual(got, first(fx.Sites, func(r projection.SiteRecord) bool { return r.SiteID == s.SiteID })) {
			t.Fatalf("SiteFor(%q) = %+v, %v", s.SiteID, got, ok)
		}
	}
	for _, d := range fx.Devices {
		got, ok := p.DeviceFor(d.RunnerID)
		if !ok || got != first(fx.Devices, func(r projection.DeviceRecord) bool { return r.RunnerID == d.RunnerID }) {
			t.Fatalf("DeviceFor(%q) = %+v, %v", d.RunnerID, got, ok)
		}
		got, ok = p.DeviceByFingerprint(d.Device.Identity)
		if !ok || got != first(fx.Devices, func(r projection.DeviceRecord) bool { return r.Device.Identity == d.Device.Identity }) {
			t.Fatalf("DeviceByFingerprint(%q) = %+v, %v", d.Device.Identity, got, ok)
		}
	}
	revoked := func(owner, site string) bool {
		for _, r := range fx.Revoked {
			if r.Owner == owner && r.SiteID == site {
				return true
			}
		}
		return false
	}
	for _, c := range fx.Consents {
		got, ok := p.ConsentFor(c.Owner, c.SiteID)
		want := first(fx.Consents, func(r projection.ConsentRecord) bool { return r.Owner == c.Owner && r.SiteID == c.SiteID })
		if revoked(c.Owner, c.SiteID) {
			if ok {
				t.Fatalf("ConsentFor(%q, %q) = %+v despite a revocation", c.Owner, c.SiteID, got)
			}
		} else if !ok || got != want {
			t.Fatalf("ConsentFor(%q, %q) = %+v, %v, want %+v", c.Owner, c.SiteID, got, ok, want)
		}
		checkV2Queries(t, p, c.Owner)
		for _, o := range p.RoutableOwners(c.Owner, c.SiteID) {
			if !p.MayRouteFor(o, c.SiteID) || !p.MayRunFor(c.Owner, o) {
				t.Fatalf("RoutableOwners(%q, %q) lists %q, which may not route or run", c.Owner, c.SiteID, o)
			}
		}
	}
	for _, r := range fx.Rosters {
		owners := p.OwnersRunnableBy(r.Owner)
		if len(owners) == 0 || owners[0] != r.Owner {
			t.Fatalf("OwnersRunnableBy(%q) = %v: the owner comes first", r.Owner, owners)
		}
		for _, m := range r.Members {
			if !p.MayRunFor(r.Owner, m) {
				t.Fatalf("MayRunFor(%q, %q) is false for a roster member", r.Owner, m)
			}
		}
	}
}

// checkV2Queries checks the protocol-2 queries for owner against the v0
// ones they are built from.
func checkV2Queries(t *testing.T, p *projection.Projection, owner string) {
	t.Helper()
	sites := p.SitesFor(owner)
	for i, s := range sites {
		if _, ok := p.ConsentFor(owner, s.SiteID); !ok {
			t.Fatalf("SitesFor(%q) lists %q without a live consent", owner, s.SiteID)
		}
		if i > 0 && projection.JSLess(s.SiteID, sites[i-1].SiteID) {
			t.Fatalf("SitesFor(%q) is out of order at %d", owner, i)
		}
	}
	for _, r := range p.RoutesFor(owner) {
		if !p.MayRouteFor(owner, r.SiteID) || !p.MayRouteFor(r.Owner, r.SiteID) || !p.MayRunFor(owner, r.Owner) {
			t.Fatalf("RoutesFor(%q) lists %+v", owner, r)
		}
	}
	for _, r := range p.ClaimRoutesFor(owner) {
		if r.Owner != owner {
			t.Fatalf("ClaimRoutesFor(%q) lists another owner's route %+v", owner, r)
		}
	}
}

func first[T any](records []T, match func(T) bool) T {
	for _, r := range records {
		if match(r) {
			return r
		}
	}
	var zero T
	return zero
}
