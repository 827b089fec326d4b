package proto2

import (
	"regexp"
	"strconv"
	"strings"
)

// UpdateOfferSince is the first daemon version that can read updateTo;
// older daemons are never offered one (§4.13).
const UpdateOfferSince = "0.1.0-alpha.83"

// versionPattern is a daemon version: three release numbers, an optional
// prerelease and optional build metadata (which does not order).
var versionPattern = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$`)

// version is a parsed daemon version. Numbers are float64 because the
// reference reads them with Number(), so digits past 2^53 round alike.
type version struct {
	release [3]float64
	pre     []preID
}

// preID is one dot-separated prerelease part: all digits is a number.
type preID struct {
	numeric bool
	n       float64
	s       string
}

func parseVersion(v string) (version, bool) {
	m := versionPattern.FindStringSubmatch(v)
	if m == nil {
		return version{}, false
	}
	var out version
	for i := range out.release {
		out.release[i], _ = strconv.ParseFloat(m[i+1], 64)
	}
	if m[4] != "" {
		for part := range strings.SplitSeq(m[4], ".") {
			id := preID{s: part, numeric: part != "" && strings.Trim(part, "0123456789") == ""}
			if id.numeric {
				id.n, _ = strconv.ParseFloat(part, 64)
			}
			out.pre = append(out.pre, id)
		}
	}
	return out, true
}

// CompareVersions orders two daemon versions as the reference's
// compareVersions does: release numbers numerically, a release above any
// of its prereleases, prerelease parts pairwise (numbers numerically and
// below words, words in string order, a shorter list lower). ok is false
// when either does not parse, in which case no floor refuses and no offer
// is made.
func CompareVersions(a, b string) (order int, ok bool) {
	l, okL := parseVersion(a)
	r, okR := parseVersion(b)
	if !okL || !okR {
		return 0, false
	}
	for i := range l.release {
		if c := compareFloat(l.release[i], r.release[i]); c != 0 {
			return c, true
		}
	}
	switch {
	case len(l.pre) == 0 && len(r.pre) > 0:
		return 1, true
	case len(l.pre) > 0 && len(r.pre) == 0:
		return -1, true
	}
	for i := 0; i < max(len(l.pre), len(r.pre)); i++ {
		switch {
		case i >= len(l.pre):
			return -1, true
		case i >= len(r.pre):
			return 1, true
		}
		if c := comparePre(l.pre[i], r.pre[i]); c != 0 {
			return c, true
		}
	}
	return 0, true
}

func comparePre(l, r preID) int {
	switch {
	case l.numeric && r.numeric:
		return compareFloat(l.n, r.n)
	case l.numeric:
		return -1
	case r.numeric:
		return 1
	}
	return strings.Compare(l.s, r.s)
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CheckFloor is the heartbeat's floor (§3.9 step 2): BelowFloor when
// daemonVersion orders below floor, nil otherwise, and nil when either does
// not parse.
func CheckFloor(daemonVersion, floor string) *Refusal {
	if order, ok := CompareVersions(daemonVersion, floor); ok && order < 0 {
		return BelowFloor(daemonVersion, floor)
	}
	return nil
}

// UpdateTo is the heartbeat's updateTo for a daemon, or "" for none: offer
// must be set and an exact version, the daemon must parse and be at or
// above UpdateOfferSince, and not already run offer.
func UpdateTo(offer, daemonVersion string) string {
	if offer == "" || !versionPattern.MatchString(offer) || daemonVersion == offer {
		return ""
	}
	if order, ok := CompareVersions(daemonVersion, UpdateOfferSince); !ok || order < 0 {
		return ""
	}
	return offer
}
