package valkey

import (
	"sync"

	"github.com/byollm/relayd/store"
)

// resultsCache keeps the decoded jobs of each site's last results listing.
// Sites poll that listing and it holds every result until its deadline, so
// most of a poll is jobs the previous poll decoded already. An entry is
// reused only when the record and result read now are byte for byte the
// ones it was decoded from, so a changed job is always decoded afresh; the
// cache saves decoding, never a read.
type resultsCache struct {
	mu    sync.Mutex
	sites map[string]map[string]cachedJob
}

type cachedJob struct {
	record, result string
	job            store.Job
}

// listing is one results listing in progress: the entries it may reuse and
// the ones it has read, which replace them when the listing completes.
type listing struct {
	prev, next map[string]cachedJob
}

func (c *resultsCache) begin(siteID string) *listing {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &listing{prev: c.sites[siteID], next: map[string]cachedJob{}}
}

// commit keeps what a complete listing read; jobs no longer listed go.
func (c *resultsCache) commit(siteID string, l *listing) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sites == nil {
		c.sites = map[string]map[string]cachedJob{}
	}
	c.sites[siteID] = l.next
}

// decode returns the job stored as record and result, reusing an earlier
// decoding of the same bytes. Listings carry no payload.
func (l *listing) decode(id, record string, result *string) (store.Job, error) {
	if result != nil {
		if c, ok := l.prev[id]; ok && c.record == record && c.result == *result {
			l.next[id] = c
			return c.job.Clone(), nil
		}
	}
	j, err := decodeJob(id, record, nil, result)
	if err == nil && result != nil {
		l.next[id] = cachedJob{record: record, result: *result, job: j.Clone()}
	}
	return j, err
}
