package valkey

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/store"
)

// Scripts that serve no store method of their own: they are the steps of
// a results listing.
const (
	// opResultsVersion reads a site's results version: an unchanged poll
	// is this call alone.
	opResultsVersion store.Op = "resultsVersion"
	// opResultBodies reads the records and results of named done jobs.
	opResultBodies store.Op = "resultBodies"
)

var storeOnlyOps = []store.Op{opResultsVersion, opResultBodies, opBucket, opRoutes}

const (
	// DefaultResultsCacheBytes bounds each replica's cache of results
	// listings when Options.ResultsCacheBytes is zero.
	DefaultResultsCacheBytes = 64 << 20
	// listPageBytes caps the bytes of records and results one listing
	// script reads, so no page holds the server long; one job always fits.
	listPageBytes = 1 << 20
	// listingAttempts is how often a results listing is read again when
	// the site's jobs changed while it was read, before it is returned
	// as read (as a pageful read at several moments) and cached only for
	// its jobs' bodies.
	listingAttempts = 3
	// cachedJobOverhead approximates the memory of one cached job beyond
	// its stored bytes, and of one cached listing beyond its jobs.
	cachedJobOverhead = 256
)

// listingToken is what a cached listing is checked by: the site's results
// version, moved on by every change to a listed job, and the number of
// listed jobs (which a relay that keeps no version still changes).
type listingToken struct {
	version string
	count   int64
}

// siteListing is one site's results listing as read at token. It is never
// changed once cached: a poll that finds it current returns clones.
type siteListing struct {
	site  string
	token listingToken
	jobs  []cachedJob
	bytes int64
}

// cachedJob is one listed job, decoded, with the mark it was read under.
type cachedJob struct {
	id, mark string
	job      store.Job
	bytes    int64
}

// render returns the listing's jobs, each a clone no caller shares.
func (l *siteListing) render() []store.Job {
	out := make([]store.Job, len(l.jobs))
	for i, c := range l.jobs {
		out[i] = c.job.Clone()
	}
	return out
}

// resultsCache keeps each site's last results listing, least recently
// used first to go when the listings together pass limit bytes. Sites
// poll that listing and it holds every result until its deadline, so an
// unchanged poll is answered from here after one tiny script, and a
// changed one fetches only the jobs whose marks moved.
type resultsCache struct {
	mu    sync.Mutex
	limit int64
	used  int64
	lru   *list.List // of *siteListing, most recently used at the front
	sites map[string]*list.Element
}

func newResultsCache(limit int64) *resultsCache {
	return &resultsCache{limit: limit, lru: list.New(), sites: map[string]*list.Element{}}
}

// get returns the site's cached listing, or nil.
func (c *resultsCache) get(site string) *siteListing {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.sites[site]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(e)
	return e.Value.(*siteListing)
}

// put caches l in place of the site's earlier listing. A listing larger
// than the whole cache is not kept: the next poll reads it again.
func (c *resultsCache) put(l *siteListing) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.sites[l.site]; ok {
		c.remove(e)
	}
	if l.bytes > c.limit {
		return
	}
	c.sites[l.site] = c.lru.PushFront(l)
	c.used += l.bytes
	for c.used > c.limit {
		c.remove(c.lru.Back())
	}
}

func (c *resultsCache) remove(e *list.Element) {
	l := c.lru.Remove(e).(*siteListing)
	delete(c.sites, l.site)
	c.used -= l.bytes
}

// bytesUsed reports the bytes the cached listings account for.
func (c *resultsCache) bytesUsed() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Results implements store.RoutingStore. An unchanged listing costs one
// tiny script; a changed one reads ids and marks, then the bodies of only
// the jobs the cached listing does not hold as they are now.
func (s *Store) Results(ctx context.Context, siteID string) ([]store.Job, error) {
	prev := s.results.get(siteID)
	if prev != nil {
		tok, err := s.resultsVersion(ctx, siteID)
		if err != nil {
			return nil, err
		}
		if tok == prev.token {
			return prev.render(), nil
		}
	}
	var l *siteListing
	for range listingAttempts {
		var consistent bool
		var err error
		if l, consistent, err = s.readResults(ctx, siteID, prev); err != nil {
			return nil, err
		}
		if consistent {
			s.results.put(l)
			return l.render(), nil
		}
		prev = l
	}
	// Results kept arriving while it was read. Each job in it was read
	// with its mark in one step, so the next poll may reuse any whose mark
	// is unchanged; the listing is kept under a token no version matches,
	// for that poll reads the ids again.
	l.token = unmatchedToken
	s.results.put(l)
	return l.render(), nil
}

// unmatchedToken is the token of a cached listing that was never read
// whole at one moment: no site's results version has a negative count.
var unmatchedToken = listingToken{count: -1}

func (s *Store) resultsVersion(ctx context.Context, siteID string) (listingToken, error) {
	msg, err := s.exec(ctx, s.newCall(opResultsVersion, siteID))
	if err != nil {
		return listingToken{}, err
	}
	ms, err := msg.ToArray()
	if err != nil || len(ms) != 2 {
		return listingToken{}, fmt.Errorf("valkey store: %s: unexpected reply", opResultsVersion)
	}
	return tokenOf(opResultsVersion, ms)
}

func tokenOf(op store.Op, ms []valkey.ValkeyMessage) (listingToken, error) {
	version, err1 := ms[0].ToString()
	count, err2 := ms[1].AsInt64()
	if err := errors.Join(err1, err2); err != nil {
		return listingToken{}, fmt.Errorf("valkey store: %s: version: %w", op, err)
	}
	return listingToken{version: version, count: count}, nil
}

// listed is a job a results page named, with its change mark.
type listed struct{ id, mark string }

// readResults reads a site's listing, reusing from prev every job whose
// mark is unchanged. It reports whether every step saw one token, which
// makes the listing exactly the site's at that token.
func (s *Store) readResults(ctx context.Context, siteID string, prev *siteListing) (*siteListing, bool, error) {
	ids, tok, consistent, err := s.resultIDs(ctx, siteID)
	if err != nil {
		return nil, false, err
	}
	known := map[string]cachedJob{}
	if prev != nil {
		for _, c := range prev.jobs {
			known[c.id] = c
		}
	}
	var need []string
	for _, e := range ids {
		if c, ok := known[e.id]; !ok || e.mark == "" || c.mark != e.mark {
			need = append(need, e.id)
		}
	}
	fetched, same, err := s.resultBodies(ctx, siteID, need, tok)
	if err != nil {
		return nil, false, err
	}
	l := &siteListing{site: siteID, token: tok, bytes: cachedJobOverhead}
	for _, e := range ids {
		c, ok := fetched[e.id]
		if !ok {
			if c, ok = known[e.id]; !ok || e.mark == "" || c.mark != e.mark {
				continue // gone, or unreadable, by the time it was fetched
			}
		}
		l.jobs = append(l.jobs, c)
		l.bytes += c.bytes
	}
	return l, consistent && same, nil
}

// resultIDs pages through a site's listed ids and marks, reporting the
// token of the first page and whether every page saw it.
func (s *Store) resultIDs(ctx context.Context, siteID string) ([]listed, listingToken, bool, error) {
	var out []listed
	var first listingToken
	consistent := true
	for page, after := 0, ""; ; page++ {
		msg, err := s.exec(ctx, s.newCall(store.OpResults, siteID, after, strconv.Itoa(readPage), strconv.Itoa(listPageBytes)))
		if err != nil {
			return nil, listingToken{}, false, err
		}
		ms, err := msg.AsStrSlice()
		if err != nil || len(ms) < 4 || len(ms)%2 != 0 {
			return nil, listingToken{}, false, fmt.Errorf("valkey store: %s: unexpected reply", store.OpResults)
		}
		count, err := strconv.ParseInt(ms[1], 10, 64)
		if err != nil {
			return nil, listingToken{}, false, fmt.Errorf("valkey store: %s: count: %w", store.OpResults, err)
		}
		tok := listingToken{version: ms[0], count: count}
		if page == 0 {
			first = tok
		}
		consistent = consistent && tok == first
		for i := 4; i < len(ms); i += 2 {
			out = append(out, listed{id: ms[i], mark: ms[i+1]})
		}
		after = ms[2]
		if ms[3] != "1" {
			return out, first, consistent, nil
		}
	}
}

// resultBodies fetches and decodes the named jobs, in byte-bounded calls,
// reporting whether every call saw token. Jobs gone or unreadable by then
// are left out.
func (s *Store) resultBodies(ctx context.Context, siteID string, ids []string, token listingToken) (map[string]cachedJob, bool, error) {
	out := map[string]cachedJob{}
	same := true
	for len(ids) > 0 {
		batch := ids[:min(len(ids), readPage)]
		msg, err := s.exec(ctx, s.newCall(opResultBodies, append([]string{siteID, strconv.Itoa(listPageBytes)}, batch...)...))
		if err != nil {
			return nil, false, err
		}
		ms, err := msg.ToArray()
		if err != nil || len(ms) < 2 || (len(ms)-2)%4 != 0 {
			return nil, false, fmt.Errorf("valkey store: %s: unexpected reply", opResultBodies)
		}
		tok, err := tokenOf(opResultBodies, ms)
		if err != nil {
			return nil, false, err
		}
		same = same && tok == token
		if len(ms) == 2 {
			return nil, false, fmt.Errorf("valkey store: %s: no job in the reply", opResultBodies)
		}
		for i := 2; i < len(ms); i += 4 {
			c, ok, err := decodeListed(ms[i : i+4])
			if err != nil {
				return nil, false, err
			}
			if ok {
				out[c.id] = c
			}
		}
		ids = ids[(len(ms)-2)/4:]
	}
	return out, same, nil
}

// decodeListed decodes one (id, mark, record, result) group of a
// resultBodies reply; ok is false for a job gone or unreadable.
func decodeListed(ms []valkey.ValkeyMessage) (cachedJob, bool, error) {
	var parts [4]*string
	for k := range parts {
		v, err := nullable(ms[k])
		if err != nil {
			return cachedJob{}, false, fmt.Errorf("valkey store: %s: %w", opResultBodies, err)
		}
		parts[k] = v
	}
	if parts[0] == nil || parts[2] == nil || parts[3] == nil {
		return cachedJob{}, false, nil
	}
	id, mark := *parts[0], ""
	if parts[1] != nil {
		mark = *parts[1]
	}
	j, err := decodeJob(id, *parts[2], nil, parts[3])
	if errors.Is(err, errUnreadable) {
		return cachedJob{}, false, nil
	}
	if err != nil {
		return cachedJob{}, false, fmt.Errorf("valkey store: %s: %w", opResultBodies, err)
	}
	size := int64(len(id)+len(mark)+len(*parts[2])+len(*parts[3])) + cachedJobOverhead
	return cachedJob{id: id, mark: mark, job: j, bytes: size}, true, nil
}
