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
const claimFirst = "if ARGV[10] == '1' and redis.call('PEXPIRE', K.routes, ROUTES_TTL_MS) == 0 then\n" +
	"  return redis.error_reply('" + noRoutes + " the claim\\'s route list is not stored')\n" +
	"end\n"

// takesRoutes marks the scripts that receive a route list as K.routes,
// the last key.
func takesRoutes(op store.Op) bool { return op == store.OpClaim || op == opRoutes }

// routeLists remembers which route lists this replica stored, by key, so
// that a claim names a stored list in one round trip. A list the server
// dropped since (unused for routesTTL, or a flushed server) costs the
// claim that meets it one more store and call.
type routeLists struct {
	mu     sync.Mutex
	stored map[string]bool
}

func newRouteLists() *routeLists {
	return &routeLists{stored: map[string]bool{}}
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

// routeList returns a claim's routes in order, each once, and the key
// they are stored under, which names the set by its digest. The order
// need only be the same for the same set: it is (site, owner), which is
// cheaper to sort than the fields.
func (s *Store) routeList(p store.Proto, routes []store.Route) (string, []store.Route) {
	sorted := slices.Clone(routes)
	slices.SortFunc(sorted, func(a, b store.Route) int {
		return cmp.Or(strings.Compare(a.SiteID, b.SiteID), strings.Compare(a.Owner, b.Owner))
	})
	sorted = slices.Compact(sorted)
	h := sha256.New()
	var buf []byte
	for _, r := range sorted {
		buf = appendRouteField(buf[:0], p, r)
		h.Write(buf)
	}
	return s.prefix + "routes:" + hex.EncodeToString(h.Sum(nil)), sorted
}

// storeRoutes stores a claim's route fields under key.
func (s *Store) storeRoutes(ctx context.Context, key string, p store.Proto, routes []store.Route) error {
	fields := make([]string, len(routes))
	for i, r := range routes {
		fields[i] = routeField(p, r)
	}
	c := call{op: opRoutes, keys: append(slices.Clip(s.keys), key), args: fields}
	if _, err := s.execWrite(ctx, c); err != nil {
		return err
	}
	s.routeLists.add(key)
	return nil
}

// execClaim runs a claim call over routes, storing their list first when
// this replica has not lately, and again once when the server lost it.
func (s *Store) execClaim(ctx context.Context, c call, p store.Proto, routes []store.Route) ([]string, error) {
	key, list := s.routeList(p, routes)
	c.keys = append(slices.Clip(c.keys), key)
	if len(routes) == 0 {
		return s.execWrite(ctx, c)
	}
	if !s.routeLists.has(key) {
		if err := s.storeRoutes(ctx, key, p, list); err != nil {
			return nil, err
		}
	}
	parts, err := s.execWrite(ctx, c)
	if err == nil || !strings.Contains(err.Error(), noRoutes) {
		return parts, err
	}
	if err := s.storeRoutes(ctx, key, p, list); err != nil {
		return nil, err
	}
	parts, err = s.execWrite(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("after storing its route list: %w", err)
	}
	return parts, nil
}
