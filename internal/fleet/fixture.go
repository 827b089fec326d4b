package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
)

// DefaultSiteID is the site a generated fixture registers unless told
// otherwise.
const DefaultSiteID = "site_fleet"

// FixtureOptions describe a generated fixture.
type FixtureOptions struct {
	// Devices is how many devices to approve; at least 1.
	Devices int
	// Owners is how many owners share them, round-robin (device i belongs
	// to owner i mod Owners); 0 means one owner per device. Every owner has
	// a live consent for the site.
	Owners int
	// Spares is how many extra devices to approve, each for an owner of
	// its own, after the others. A workload given Pool() leaves them
	// alone, so tests can drive jobs for them by hand that no workload
	// daemon can claim.
	Spares int
	// SiteID is the main site; "" means DefaultSiteID.
	SiteID string
	// ExtraSites is how many more sites to register (ExtraSiteName(i)),
	// each with the same consents as the main site, for protocol "2",
	// which routes for every site in the fixture.
	ExtraSites int
}

// Fixture is a generated fixture and the private keys behind it.
type Fixture struct {
	// Path is the fixture file; KeysPath the key file (demo-keys format,
	// readable with peer.LoadDemoKeys).
	Path     string
	KeysPath string
	// SiteID is the registered site.
	SiteID string
	// Owners lists the pool's owners in order; Keys holds the site's and
	// every device's keys (spares last), with runner ids and owners.
	Owners []string
	Keys   peer.DemoKeys
	// Spares are the spare devices, each with an owner of its own.
	Spares []peer.DemoDevice
	// ExtraSites are the extra sites' ids and keys.
	ExtraSites []peer.DemoSite
}

// ExtraSiteName is the id of extra site i in a generated fixture.
func ExtraSiteName(i int) string { return fmt.Sprintf("site_extra%02d", i) }

// SpareOwnerName is the owner of spare device i.
func SpareOwnerName(i int) string { return fmt.Sprintf("spare%03d", i) }

// Pool returns the keys without the spare devices: what a workload runs.
func (f *Fixture) Pool() peer.DemoKeys {
	k := f.Keys
	k.Devices = slices.Clone(k.Devices[:len(k.Devices)-len(f.Spares)])
	return k
}

// OwnerName is the name of owner i in a generated fixture.
func OwnerName(i int) string { return fmt.Sprintf("owner%03d", i) }

// RunnerName is the runner id of device i in a generated fixture.
func RunnerName(i int) string { return fmt.Sprintf("runner_%04d", i) }

// WriteFixture generates fresh keys for a site and o.Devices devices and
// writes fixture.json and keys.json into dir, or into a new temporary
// directory when dir is "" (the caller removes it; Fixture.Path names it).
// The fixture is checked with the relay's own parser before it is returned.
func WriteFixture(dir string, o FixtureOptions) (*Fixture, error) {
	if o.Devices < 1 || o.Spares < 0 || o.ExtraSites < 0 {
		return nil, errors.New("fixture: at least one device is needed")
	}
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "relayd-fixture-"); err != nil {
			return nil, fmt.Errorf("fixture: %w", err)
		}
	}
	if o.Owners <= 0 || o.Owners > o.Devices {
		o.Owners = o.Devices
	}
	if o.SiteID == "" {
		o.SiteID = DefaultSiteID
	}
	siteKeys, err := peer.GenerateKeys()
	if err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	fx := &Fixture{
		Path:     filepath.Join(dir, "fixture.json"),
		KeysPath: filepath.Join(dir, "keys.json"),
		SiteID:   o.SiteID,
		Keys: peer.DemoKeys{
			Note: "generated for a test fleet; throwaway keys",
			Site: peer.DemoSite{SiteID: o.SiteID, Keys: siteKeys},
		},
	}
	doc := projection.Empty()
	siteIDs, err := addSites(doc, fx, o.ExtraSites)
	if err != nil {
		return nil, err
	}
	consent := func(owner string) {
		for _, site := range siteIDs {
			doc.Consents = append(doc.Consents, projection.ConsentRecord{Owner: owner, SiteID: site})
		}
	}
	for i := range o.Owners {
		owner := OwnerName(i)
		fx.Owners = append(fx.Owners, owner)
		consent(owner)
	}
	if err := addDevices(doc, fx, o, consent); err != nil {
		return nil, err
	}

	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("fixture: encode: %w", err)
	}
	// What relayd would refuse is a harness bug; find it here, not as a
	// replica that will not start.
	if _, err := projection.Parse(data); err != nil {
		return nil, fmt.Errorf("fixture: generated document does not parse: %w", err)
	}
	if err := os.WriteFile(fx.Path, data, 0o644); err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	keyData, err := peer.MarshalDemoKeys(fx.Keys)
	if err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	if err := os.WriteFile(fx.KeysPath, keyData, 0o600); err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	return fx, nil
}

// addSites registers the main site and n extra ones, with fresh keys for
// the extra ones, and returns every site id.
func addSites(doc *projection.Fixture, fx *Fixture, n int) ([]string, error) {
	doc.Sites = append(doc.Sites, projection.SiteRecord{SiteID: fx.SiteID, Site: fx.Keys.Site.Keys.Public()})
	siteIDs := []string{fx.SiteID}
	for i := range n {
		keys, err := peer.GenerateKeys()
		if err != nil {
			return nil, fmt.Errorf("fixture: %w", err)
		}
		extra := peer.DemoSite{SiteID: ExtraSiteName(i), Keys: keys}
		fx.ExtraSites = append(fx.ExtraSites, extra)
		siteIDs = append(siteIDs, extra.SiteID)
		doc.Sites = append(doc.Sites, projection.SiteRecord{SiteID: extra.SiteID, Site: keys.Public()})
	}
	return siteIDs, nil
}

// addDevices approves the pool's devices, round-robin over the owners,
// then the spares, each for an owner of its own who consents as others do.
func addDevices(doc *projection.Fixture, fx *Fixture, o FixtureOptions, consent func(owner string)) error {
	add := func(dev peer.DemoDevice) {
		fx.Keys.Devices = append(fx.Keys.Devices, dev)
		doc.Devices = append(doc.Devices, projection.DeviceRecord{Owner: dev.Owner, RunnerID: dev.RunnerID, Device: dev.Keys.Public()})
	}
	for i := range o.Devices {
		keys, err := peer.GenerateKeys()
		if err != nil {
			return fmt.Errorf("fixture: %w", err)
		}
		add(peer.DemoDevice{RunnerID: RunnerName(i), Owner: fx.Owners[i%o.Owners], Keys: keys})
	}
	for i := range o.Spares {
		keys, err := peer.GenerateKeys()
		if err != nil {
			return fmt.Errorf("fixture: %w", err)
		}
		dev := peer.DemoDevice{RunnerID: fmt.Sprintf("runner_spare%03d", i), Owner: SpareOwnerName(i), Keys: keys}
		fx.Spares = append(fx.Spares, dev)
		consent(dev.Owner)
		add(dev)
	}
	return nil
}

// DevicesOf returns the devices of owner.
func (f *Fixture) DevicesOf(owner string) []peer.DemoDevice {
	var out []peer.DemoDevice
	for _, d := range f.Keys.Devices {
		if d.Owner == owner {
			out = append(out, d)
		}
	}
	return out
}

// SiteKeyID is the key id a stub of this site must carry in its site field.
func (f *Fixture) SiteKeyID() string { return protocol.KeyID(f.Keys.Site.Keys.IdentityPublic()) }
