package valkey

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/byollm/relayd/store"
)

// opRoutes stores the route list of a claim under its digest (routes.lua),
// so that a claim over a long roster names one key instead of sending and
// parsing every route: the claim intersects it with the routes that hold
// work (K.busy) in one call.
const opRoutes store.Op = "routes"

const (
	// routesTTL is how long a stored route list outlives its last claim.
	routesTTL = 15 * time.Minute
	// rememberedRouteLists bounds a replica's memory of the route lists
	// it stored; past it the memory starts again (a claim then stores its
	// list once more).
	rememberedRouteLists = 4096
	// noRoutes starts the error a claim answers when its route list is
	// not stored.
	noRoutes = "NOROUTES"
)

// claimFirst runs before a claim's admission: a claim naming routes
// whose list is not stored does nothing and says so, and a use refreshes
// the list's expiry.
const claimFirst = "if A.has_routes == '1' and redis.call('PEXPIRE', K.routes, ROUTES_TTL_MS) == 0 then\n" +
	"  return redis.error_reply('" + noRoutes + " the claim\\'s route list is not stored')\n" +
	"end\n"

// routeLists remembers which route lists this replica stored, by key, so
// that a claim names a stored list in one round trip. A list the server
// dropped since (unused for routesTTL, or a flushed server) costs the
// claim that meets it one more store and call. It also remembers the key
// of each list as it came (by the digest of its routes in their order),
// so a claim over the same routes as before sorts none.
type routeLists struct {
	mu     sync.Mutex
	stored map[string]bool
	keys   map[[sha256.Size]byte]string
}

func newRouteLists() *routeLists {
	return &routeLists{stored: map[string]bool{}, keys: map[[sha256.Size]byte]string{}}
}

func (l *routeLists) has(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stored[key]
}

func (l *routeLists) add(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.stored) >= rememberedRouteLists {
		clear(l.stored)
	}
	l.stored[key] = true
}

func (l *routeLists) keyOf(ordered [sha256.Size]byte) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key, ok := l.keys[ordered]
	return key, ok
}

func (l *routeLists) addKey(ordered [sha256.Size]byte, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.keys) >= rememberedRouteLists {
		clear(l.keys)
	}
	l.keys[ordered] = key
}

// routeField names a route's queues of one protocol as the scripts'
// route_field does.
func routeField(p store.Proto, r store.Route) string {
	return string(appendRouteField(nil, p, r))
}

func appendRouteField(b []byte, p store.Proto, r store.Route) []byte {
	for _, s := range []string{proto(p), r.SiteID, r.Owner} {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	return b
}

// fieldsDigest is the SHA-256 of routes' fields in their order; the
// fields delimit themselves, so no two lists share one.
func fieldsDigest(p store.Proto, routes []store.Route) [sha256.Size]byte {
	h := sha256.New()
	var buf []byte
	for _, r := range routes {
		buf = appendRouteField(buf[:0], p, r)
		h.Write(buf)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// routeListKey returns the key a claim's routes are stored under: it names
// the set by the digest of its routes in (site, owner) order, each once.
func (s *Store) routeListKey(p store.Proto, routes []store.Route) string {
	ordered := fieldsDigest(p, routes)
	if key, ok := s.routeLists.keyOf(ordered); ok {
		return key
	}
	sorted := slices.Clone(routes)
	slices.SortFunc(sorted, func(a, b store.Route) int {
		return cmp.Or(strings.Compare(a.SiteID, b.SiteID), strings.Compare(a.Owner, b.Owner))
	})
	sum := fieldsDigest(p, slices.Compact(sorted))
	key := s.prefix + "routes:" + hex.EncodeToString(sum[:])
	s.routeLists.addKey(ordered, key)
	return key
}

// storeRoutes stores the fields of a claim's routes under key.
func (s *Store) storeRoutes(ctx context.Context, key string, p store.Proto, routes []store.Route) error {
	fields := make([]string, len(routes))
	for i, r := range routes {
		fields[i] = routeField(p, r)
	}
	c := s.newCall(routesArgs{Fields: fields})
	c.keys = append(slices.Clip(c.keys), key)
	if _, err := s.execWrite(ctx, c); err != nil {
		return err
	}
	s.routeLists.add(key)
	return nil
}

// execClaim runs a claim call over routes, storing their list first when
// this replica has not lately, and again once when the server lost it.
func (s *Store) execClaim(ctx context.Context, c call, p store.Proto, routes []store.Route) ([]string, error) {
	key := s.routeListKey(p, routes)
	c.keys = append(slices.Clip(c.keys), key)
	if len(routes) == 0 {
		return s.execWrite(ctx, c)
	}
	if !s.routeLists.has(key) {
		if err := s.storeRoutes(ctx, key, p, routes); err != nil {
			return nil, err
		}
	}
	parts, err := s.execWrite(ctx, c)
	if err == nil || !strings.Contains(err.Error(), noRoutes) {
		return parts, err
	}
	if err := s.storeRoutes(ctx, key, p, routes); err != nil {
		return nil, err
	}
	parts, err = s.execWrite(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("after storing its route list: %w", err)
	}
	return parts, nil
}
