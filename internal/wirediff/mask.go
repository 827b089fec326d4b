package main

import (
	"fmt"
	"regexp"
)

// masker replaces, in the raw bytes of an answer, only the values that are
// random or time-dependent by nature; every other byte is compared as
// sent. A random value becomes a placeholder numbered by first appearance
// within its run, so two runs still agree only if they use the same value
// in the same places (a lease id handed out, renewed, then released).
type masker struct {
	seen map[string]int
}

func newMasker() *masker { return &masker{seen: map[string]int{}} }

var (
	// timeField is a JSON member holding a clock reading or a time derived
	// from one: deadlines set by the script from the clock, lease expiries,
	// the end of a pending job's sealing window, the server's time.
	timeField = regexp.MustCompile(`"(\w*At|\w*Until|serverTime|now|uptime\w*)":(-?[0-9]+|"[^"]*")`)
	// randomField is a JSON member drawn at random: lease and request ids,
	// sealed bytes, pairing codes.
	randomField = regexp.MustCompile(`"(leaseId|requestId|ciphertext|userCode|deviceCode)":"([^"]*)"`)
	// leaseID is the id inside a claimed stub's lease object.
	leaseID = regexp.MustCompile(`"lease":\{"id":"([^"]*)"`)
	// sinceSeen is the debug page's "last seen" age of a runner.
	sinceSeen = regexp.MustCompile(`>[0-9.]+(ns|µs|ms|s|m|h)+ ago<`)
)

func (m *masker) body(b []byte) []byte {
	b = timeField.ReplaceAll(b, []byte(`"$1":<time>`))
	b = randomField.ReplaceAllFunc(b, func(match []byte) []byte {
		sub := randomField.FindSubmatch(match)
		return fmt.Appendf(nil, `"%s":%s`, sub[1], m.number(string(sub[1]), string(sub[2])))
	})
	b = leaseID.ReplaceAllFunc(b, func(match []byte) []byte {
		sub := leaseID.FindSubmatch(match)
		return fmt.Appendf(nil, `"lease":{"id":%s`, m.number("leaseId", string(sub[1])))
	})
	return sinceSeen.ReplaceAll(b, []byte("><age> ago<"))
}

func (m *masker) number(key, value string) string {
	id := key + "\x00" + value
	n, ok := m.seen[id]
	if !ok {
		n = len(m.seen) + 1
		m.seen[id] = n
	}
	return fmt.Sprintf("<%s#%d>", key, n)
}
