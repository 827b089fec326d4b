package valkey

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/protocol"
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
	// opResultChanges reads the journal of a site's listing: what changed
	// after a version, so a changed poll reads O(the change).
	opResultChanges store.Op = "resultChanges"
)

const (
	// DefaultResultsCacheBytes bounds each replica's cache of results
	// listings when Options.ResultsCacheBytes is zero.
	DefaultResultsCacheBytes = 64 << 20
	// listPageBytes caps the bytes of records and results one listing
	// script reads, so no page holds the server long; one job always fits.
	listPageBytes = 1 << 20
	// idsPage is how many ids and marks one results script returns (about
	// 60 bytes each, so well inside listPageBytes): few round trips for
	// the one read that every changed poll makes whole.
	idsPage = 5000
	// bodyFetchers is how many resultBodies calls a poll keeps in flight.
	bodyFetchers = 4
	// listingAttempts is how often a results listing is brought up to
	// date again when the site's jobs changed while it was read, before
	// it is returned as read (pages read at several moments) and cached
	// under unmatchedToken, for its bodies and its base.
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
	// base is a version number the listing reflects every change up to
	// (it may reflect later ones too), so the journal since base brings
	// it up to date; -1 for a listing read only in part.
	base int64
	// wholeAt is the server time (µs, from the version) when the ids were
	// last read whole; the journal is trusted for journalTrust after it.
	wholeAt int64
	// scan, on a listing read in part, is its unfinished (or finished but
	// not yet fetched) read of the ids, which the next poll continues.
	scan  *listingScan
	jobs  []cachedJob
	bytes int64
}

// cachedJob is one listed job, decoded, with the mark it was read under
// and its enqueue sequence, the listing's order.
type cachedJob struct {
	id, mark string
	seq      int64
	job      store.Job
	bytes    int64
}

// render returns the listing's jobs, each a clone no caller shares.
// It copies what store.Job.Clone copies, but the claims and results of all
// the jobs into two allocations rather than two a job: a busy site's
// unchanged poll clones 100,000 jobs.
func (l *siteListing) render() []store.Job {
	out := make([]store.Job, len(l.jobs))
	claims := make([]store.Claim, len(l.jobs))
	results := make([]protocol.SealedEnvelope, len(l.jobs))
	for i, c := range l.jobs {
		j := c.job
		j.RefusedBy = slices.Clone(j.RefusedBy)
		j.RetryAfter = maps.Clone(j.RetryAfter)
		if j.ClaimedBy != nil {
			claims[i] = *j.ClaimedBy
			j.ClaimedBy = &claims[i]
		}
		if j.Result != nil {
			results[i] = *j.Result
			j.Result = &results[i]
		}
		if j.Payload != nil {
			p := *j.Payload
			j.Payload = &p
		}
		out[i] = j
	}
	return out
}

// resultsCache keeps each site's last results listing, least recently
// used first to go when the listings together pass limit bytes. Sites
// poll that listing and it holds every result until its deadline, so an
// unchanged poll is answered from here after one tiny script, and a
// changed one fetches only the jobs whose marks moved. A listing read in
// part (its poll ran out of time, or it is larger than limit) is kept
// under unmatchedToken, for the bodies it holds: the next poll reads the
// ids again and fetches only the rest.
type resultsCache struct {
	mu    sync.Mutex
	limit int64
	used  int64
	lru   *list.List // of *siteListing, most recently used at the front
	sites map[string]*list.Element
	// reading holds, per site, a channel closed when the poll now reading
	// that site's listing is done: polls of one site read it one at a
	// time, so concurrent polls never each hold a copy being read.
	reading map[string]chan struct{}
	waiting int // polls waiting for another's read
	// over is the set of sites whose last listing passed limit, so that
	// the log says so once per site and episode, not on every poll.
	over   map[string]bool
	counts ResultsCacheCounts
	logger *slog.Logger
	// fetchers is bodyFetchers, pageIDs idsPage and trust journalTrust;
	// tests change them.
	fetchers, pageIDs int
	trust             int64
}

// ResultsCacheCounts is what a replica's results cache reports to its
// metrics.
type ResultsCacheCounts struct {
	// BytesUsed is what the cached listings account for now.
	BytesUsed int64
	// OverLimit counts listings that did not fit the cache whole: each
	// was kept only in part, and the next poll of its site reads the
	// rest from Valkey again.
	OverLimit uint64
	// OverLimitBytes sums the bytes those listings could not keep.
	OverLimitBytes uint64
	// Partial counts polls that ran out of time or failed while reading,
	// keeping what they had read for the next poll.
	Partial uint64
}

func newResultsCache(limit int64) *resultsCache {
	return &resultsCache{limit: limit, lru: list.New(), sites: map[string]*list.Element{},
		reading: map[string]chan struct{}{}, over: map[string]bool{}, logger: slog.New(slog.DiscardHandler),
		fetchers: bodyFetchers, pageIDs: idsPage, trust: journalTrust}
}

// lockSite waits until no other poll of this replica reads site's
// listing, then claims it until release is called.
func (c *resultsCache) lockSite(ctx context.Context, site string) (release func(), err error) {
	for {
		c.mu.Lock()
		busy, ok := c.reading[site]
		if !ok {
			done := make(chan struct{})
			c.reading[site] = done
			c.mu.Unlock()
			return func() {
				c.mu.Lock()
				delete(c.reading, site)
				c.mu.Unlock()
				close(done)
			}, nil
		}
		c.waiting++
		c.mu.Unlock()
		var err error
		select {
		case <-busy:
		case <-ctx.Done():
			err = fmt.Errorf("valkey store: %s: waiting for this site's listing being read: %w", store.OpResults, ctx.Err())
		}
		c.mu.Lock()
		c.waiting--
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// waiters reports how many polls wait in lockSite now.
func (c *resultsCache) waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
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
// than the whole cache keeps only its first jobs that fit, under
// unmatchedToken: the site's polls cost more Valkey reads, never a wrong
// or missing answer. An unfinished read (a poll ran out of time) is kept
// whole, whatever its size, the other sites' listings going first: the
// poll that finishes it must hold it all to answer anyway, and cutting it
// down would make a listing larger than the cache, and than one poll's
// reading, unanswerable.
func (c *resultsCache) put(l *siteListing, unfinished bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.sites[l.site]; ok {
		c.remove(e)
	}
	switch {
	case l.bytes <= c.limit:
		delete(c.over, l.site)
	case !unfinished:
		l = c.overLimit(l)
	}
	if len(l.jobs) == 0 && l.scan == nil {
		return
	}
	c.sites[l.site] = c.lru.PushFront(l)
	c.used += l.bytes
	for c.used > c.limit && c.lru.Len() > 1 {
		c.remove(c.lru.Back())
	}
}

// overLimit returns the part of l the cache keeps, counting and, once per
// episode, logging what it cannot keep.
func (c *resultsCache) overLimit(l *siteListing) *siteListing {
	kept := &siteListing{site: l.site, token: unmatchedToken, base: -1, wholeAt: -1, scan: l.scan, bytes: cachedJobOverhead}
	for _, j := range l.jobs {
		if kept.bytes+j.bytes > c.limit {
			break
		}
		kept.jobs = append(kept.jobs, j)
		kept.bytes += j.bytes
	}
	if c.limit <= 0 {
		return kept // caching is off: nothing to report
	}
	c.counts.OverLimit++
	c.counts.OverLimitBytes += uint64(l.bytes - kept.bytes)
	if !c.over[l.site] {
		c.over[l.site] = true
		c.logger.Warn("a site's results listing is larger than --results-cache-bytes: each of its polls reads the part not kept from Valkey again",
			slog.String("site_id", l.site), slog.Int("jobs", len(l.jobs)), slog.Int64("listing_bytes", l.bytes),
			slog.Int64("cache_bytes", c.limit), slog.Int("jobs_kept", len(kept.jobs)))
	}
	return kept
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

func (c *resultsCache) partial() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts.Partial++
}

// ResultsCacheCounts reports this replica's results cache to its metrics.
func (s *Store) ResultsCacheCounts() ResultsCacheCounts {
	c := s.results
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	out.BytesUsed = c.used
	return out
}

// Results implements store.RoutingStore. An unchanged listing costs one
// tiny script; a changed one reads the journal of what changed since the
// cached listing (or, without one, every id and mark), then the bodies of
// only the jobs the cached listing does not hold as they are now. What a poll
// read is kept even when it fails or runs out of time, so a large listing
// is read over a few polls rather than never.
func (s *Store) Results(ctx context.Context, siteID string) ([]store.Job, error) {
	release, err := s.results.lockSite(ctx, siteID)
	if err != nil {
		return nil, err
	}
	defer release()
	prev := s.results.get(siteID)
	if prev != nil && prev.token != unmatchedToken {
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
		l, consistent, err = s.nextListing(ctx, siteID, prev)
		if err != nil {
			if l != nil {
				s.results.partial()
				l.token = unmatchedToken
				s.results.put(l, true)
			}
			return nil, err
		}
		if consistent {
			s.results.put(l, false)
			return l.render(), nil
		}
		prev = l
	}
	// Results kept arriving while it was read. Each job in it was read
	// with its mark in one step, so the next poll may reuse any whose mark
	// is unchanged; the listing is kept under a token no version matches,
	// for that poll reads the ids again.
	out := l.render()
	l.token = unmatchedToken
	s.results.put(l, false)
	return out, nil
}

// unmatchedToken is the token of a cached listing that was never read
// whole at one moment: no site's results version has a negative count.
var unmatchedToken = listingToken{count: -1}

func (s *Store) resultsVersion(ctx context.Context, siteID string) (listingToken, error) {
	msg, err := s.exec(ctx, s.newCall(resultsVersionArgs{Site: siteID}))
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

// listingScan is a read of a site's ids and marks, page by page, kept
// across polls so that a listing whose ids alone take longer than a poll's
// deadline is still read whole over a few polls.
type listingScan struct {
	after      string // the last member read
	ids        []listed
	first      listingToken
	consistent bool // every page saw first
	done       bool
}

// readResults reads a site's listing, reusing from prev every job whose
// mark is unchanged, and continuing prev's scan of the ids if it has one.
// It reports whether every step saw one token, which makes the listing
// exactly the site's at that token. When a step fails part way, it
// returns a listing (under unmatchedToken) holding what was read, for the
// caller to keep, with the error.
func (s *Store) readResults(ctx context.Context, siteID string, prev *siteListing) (*siteListing, bool, error) {
	scan := &listingScan{consistent: true}
	if prev != nil && prev.scan != nil {
		continued := *prev.scan // the cached listing's own stays as it was
		scan = &continued
	}
	if err := s.scanIDs(ctx, siteID, scan); err != nil {
		l := &siteListing{site: siteID, token: unmatchedToken, base: -1, wholeAt: -1, bytes: cachedJobOverhead, scan: scan}
		if prev != nil {
			l.jobs, l.bytes = prev.jobs, prev.bytes
		}
		return l, false, err
	}
	known := map[string]*cachedJob{}
	if prev != nil {
		for i := range prev.jobs {
			known[prev.jobs[i].id] = &prev.jobs[i]
		}
	}
	var need []string
	for _, e := range scan.ids {
		if c, ok := known[e.id]; !ok || e.mark == "" || c.mark != e.mark {
			need = append(need, e.id)
		}
	}
	tok := scan.first
	fetched, same, err := s.resultBodies(ctx, siteID, need, tok)
	l := &siteListing{site: siteID, token: tok, base: versionNumber(tok.version), wholeAt: versionTime(tok.version), bytes: cachedJobOverhead}
	for _, e := range scan.ids {
		c, ok := fetched[e.id]
		if !ok {
			k, held := known[e.id]
			if !held || e.mark == "" || k.mark != e.mark {
				continue // gone or unreadable by then, or (on err) not fetched yet
			}
			c = *k
		}
		l.jobs = append(l.jobs, c)
		l.bytes += c.bytes
	}
	if err != nil {
		l.base, l.scan = -1, scan // the next poll fetches the rest, ids as read
	}
	return l, err == nil && scan.consistent && same, err
}

// scanIDs reads the rest of scan, a page at a time, noting each page in
// scan as it arrives.
func (s *Store) scanIDs(ctx context.Context, siteID string, scan *listingScan) error {
	for !scan.done {
		msg, err := s.exec(ctx, s.newCall(resultsArgs{Site: siteID, After: scan.after, Page: s.results.pageIDs, Cap: listPageBytes}))
		if err != nil {
			return err
		}
		ms, err := msg.AsStrSlice()
		if err != nil || len(ms) < 4 || len(ms)%2 != 0 {
			return fmt.Errorf("valkey store: %s: unexpected reply", store.OpResults)
		}
		count, err := strconv.ParseInt(ms[1], 10, 64)
		if err != nil {
			return fmt.Errorf("valkey store: %s: count: %w", store.OpResults, err)
		}
		tok := listingToken{version: ms[0], count: count}
		if scan.after == "" && len(scan.ids) == 0 {
			scan.first = tok
		}
		scan.consistent = scan.consistent && tok == scan.first
		for i := 4; i < len(ms); i += 2 {
			scan.ids = append(scan.ids, listed{id: ms[i], mark: ms[i+1]})
		}
		if ms[2] != "" {
			scan.after = ms[2]
		}
		scan.done = ms[3] != "1"
	}
	return nil
}

// bodyFetch gathers what concurrent resultBodies calls read.
type bodyFetch struct {
	mu    sync.Mutex
	jobs  map[string]cachedJob
	same  bool
	token listingToken
}

func (f *bodyFetch) add(jobs []cachedJob, tok listingToken) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.same = f.same && tok == f.token
	for _, c := range jobs {
		f.jobs[c.id] = c
	}
}

// resultBodies fetches and decodes the named jobs, in byte-bounded calls
// of which up to bodyFetchers are in flight at once (so that the server
// runs one while this replica decodes another), reporting whether every
// call saw token. Jobs gone or unreadable by then are left out. On an
// error it still returns every job the calls that succeeded read.
func (s *Store) resultBodies(ctx context.Context, siteID string, ids []string, token listingToken) (map[string]cachedJob, bool, error) {
	f := &bodyFetch{jobs: map[string]cachedJob{}, same: true, token: token}
	batches := make(chan []string)
	errs := make(chan error, s.results.fetchers)
	var wg sync.WaitGroup
	for range s.results.fetchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range batches {
				if err := s.fetchBatch(ctx, siteID, batch, f); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for len(ids) > 0 {
		batch := ids[:min(len(ids), readPage)]
		select {
		case batches <- batch:
			ids = ids[len(batch):]
		case err = <-errs:
			break feed
		}
	}
	close(batches)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs // nil when the channel is empty
	}
	return f.jobs, f.same, err
}

// fetchBatch reads the bodies of ids into f, asking again for what a
// byte-capped reply left out.
func (s *Store) fetchBatch(ctx context.Context, siteID string, ids []string, f *bodyFetch) error {
	for len(ids) > 0 {
		msg, err := s.exec(ctx, s.newCall(resultBodiesArgs{Site: siteID, Cap: listPageBytes, IDs: ids}))
		if err != nil {
			return err
		}
		ms, err := msg.ToArray()
		if err != nil || len(ms) < 2 || (len(ms)-2)%4 != 0 {
			return fmt.Errorf("valkey store: %s: unexpected reply", opResultBodies)
		}
		tok, err := tokenOf(opResultBodies, ms)
		if err != nil {
			return err
		}
		if len(ms) == 2 {
			return fmt.Errorf("valkey store: %s: no job in the reply", opResultBodies)
		}
		jobs := make([]cachedJob, 0, (len(ms)-2)/4)
		for i := 2; i < len(ms); i += 4 {
			c, ok, err := decodeListed(ms[i : i+4])
			if err != nil {
				return err
			}
			if ok {
				jobs = append(jobs, c)
			}
		}
		f.add(jobs, tok)
		ids = ids[(len(ms)-2)/4:]
	}
	return nil
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
	return cachedJob{id: id, mark: mark, seq: recordSeq(*parts[2]), job: j, bytes: size}, true, nil
}

// versionNumber is the count a results version starts with: 0 before the
// first change, -1 for a version no relay wrote.
func versionNumber(v string) int64 {
	if v == "" {
		return 0
	}
	digits := v
	if dot := strings.IndexByte(v, '.'); dot >= 0 {
		digits = v[:dot]
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// journalTrust is how long after reading a listing's ids whole a replica
// brings it up to date from the journal alone. The journal counts
// versions; a failover that loses the last writes may issue a version
// number again for other changes, which the journal cannot tell apart, so
// the ids are read whole again this often (about 60 bytes a job) to bound
// what such a loss can hide. The count of listed jobs is checked on every
// poll besides.
const journalTrust = int64(time.Minute / time.Microsecond)

// trusted says whether the journal may bring prev up to tok: the version
// has not gone back, and prev's ids were read whole recently enough.
func trusted(prev *siteListing, tok listingToken, trust int64) bool {
	n, at := versionNumber(tok.version), versionTime(tok.version)
	return n >= prev.base && prev.wholeAt >= 0 && at >= prev.wholeAt && at-prev.wholeAt < trust
}

// versionTime is the server time, in microseconds, a results version
// carries after its count; -1 for one without.
func versionTime(v string) int64 {
	_, after, ok := strings.Cut(v, ".")
	if !ok {
		return -1
	}
	t, err := strconv.ParseInt(after, 10, 64)
	if err != nil {
		return -1
	}
	return t
}

// nextListing brings prev up to date from the journal of changes when it
// can, and reads the listing whole when it cannot.
func (s *Store) nextListing(ctx context.Context, siteID string, prev *siteListing) (*siteListing, bool, error) {
	if prev != nil && prev.base >= 0 {
		l, consistent, usable, err := s.patchResults(ctx, siteID, prev)
		if err != nil || usable {
			return l, consistent, err
		}
	}
	return s.readResults(ctx, siteID, prev)
}

// patchResults applies to prev the journal's changes since prev.base:
// jobs gone leave, jobs new or changed are fetched. usable is false when
// the journal does not cover them (or the outcome does not add up), and
// the listing must be read whole. A fetch that fails part way still
// returns the merged listing, at prev's base, for the caller to keep.
func (s *Store) patchResults(ctx context.Context, siteID string, prev *siteListing) (_ *siteListing, consistent, usable bool, _ error) {
	gone, tokGone, usable, sameGone, err := s.resultChanges(ctx, siteID, prev.base, "t")
	if err != nil || !usable || !trusted(prev, tokGone, s.results.trust) {
		return nil, false, false, err
	}
	live, tok, usable, sameLive, err := s.resultChanges(ctx, siteID, prev.base, "l")
	if err != nil || !usable {
		return nil, false, usable, err
	}
	held := make(map[string]*cachedJob, len(prev.jobs))
	for i := range prev.jobs {
		held[prev.jobs[i].id] = &prev.jobs[i]
	}
	drop := map[string]bool{}
	for _, e := range gone {
		drop[e.id] = true
	}
	var need []string
	for _, e := range live {
		if e.mark == "" {
			drop[e.id] = true
			continue
		}
		delete(drop, e.id)
		if c, ok := held[e.id]; !ok || c.mark != e.mark {
			need = append(need, e.id)
			drop[e.id] = true // stale unless fetched afresh
		}
	}
	fetched, same, err := s.resultBodies(ctx, siteID, need, tok)
	l := merged(prev, drop, fetched)
	consistent = err == nil && sameGone && sameLive && same && tokGone == tok
	if consistent {
		if int64(len(l.jobs)) != tok.count {
			return nil, false, false, nil // jobs came or went unjournalled
		}
		l.token, l.base = tok, versionNumber(tok.version)
	}
	return l, consistent, true, err
}

// merged is prev without the jobs in drop, with fetched added or in place,
// in enqueue order.
func merged(prev *siteListing, drop map[string]bool, fetched map[string]cachedJob) *siteListing {
	l := &siteListing{site: prev.site, token: unmatchedToken, base: prev.base, wholeAt: prev.wholeAt, bytes: cachedJobOverhead,
		jobs: make([]cachedJob, 0, len(prev.jobs)+len(fetched))}
	for _, c := range prev.jobs {
		if f, ok := fetched[c.id]; ok {
			c = f
			delete(fetched, c.id)
		} else if drop[c.id] {
			continue
		}
		l.jobs = append(l.jobs, c)
		l.bytes += c.bytes
	}
	for _, c := range fetched {
		l.jobs = append(l.jobs, c)
		l.bytes += c.bytes
	}
	if len(fetched) > 0 {
		slices.SortStableFunc(l.jobs, func(a, b cachedJob) int { return cmp.Compare(a.seq, b.seq) })
	}
	return l
}

// resultChanges pages through the journal entries of one kind ("l" live,
// "t" tombstones) of a site after version number since, reporting the
// first page's token, whether the journal covers them, and whether every
// page saw one token.
func (s *Store) resultChanges(ctx context.Context, siteID string, since int64, kind string) (_ []listed, first listingToken, usable, consistent bool, _ error) {
	var out []listed
	consistent = true
	for page, after := 0, ""; ; page++ {
		msg, err := s.exec(ctx, s.newCall(resultChangesArgs{Site: siteID, Since: since, Kind: kind, After: after, Page: s.results.pageIDs}))
		if err != nil {
			return nil, listingToken{}, false, false, err
		}
		ms, err := msg.AsStrSlice()
		if err != nil || len(ms) < 5 || (len(ms)-5)%2 != 0 {
			return nil, listingToken{}, false, false, fmt.Errorf("valkey store: %s: unexpected reply", opResultChanges)
		}
		count, err := strconv.ParseInt(ms[1], 10, 64)
		if err != nil {
			return nil, listingToken{}, false, false, fmt.Errorf("valkey store: %s: count: %w", opResultChanges, err)
		}
		tok := listingToken{version: ms[0], count: count}
		if page == 0 {
			first = tok
		}
		if ms[2] != "1" {
			return nil, first, false, false, nil
		}
		consistent = consistent && tok == first
		for i := 5; i < len(ms); i += 2 {
			out = append(out, listed{id: ms[i], mark: ms[i+1]})
		}
		after = ms[3]
		if ms[4] != "1" {
			return out, first, true, consistent, nil
		}
	}
}

// recordSeq reads a job record's enqueue sequence, the order of the
// site's listing; 0 when the record does not say.
func recordSeq(raw string) int64 {
	f, err := unframe(raw)
	if err != nil || len(f) <= fieldSeq {
		return 0
	}
	n, _ := strconv.ParseInt(f[fieldSeq], 10, 64)
	return n
}
