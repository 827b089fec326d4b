package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// cgProfile is the part of a callgrind dump opcost reads: each function's
// own instructions, and what each function's calls to each other function
// cost in all (callgrind measures a call's cost as it ran, callees
// included).
type cgProfile struct {
	self  map[string]int64
	calls map[string]map[string]int64
}

// readCallgrind reads a dump of one event (Ir) written without
// --dump-instr or --collect-jumps: "fn=" and "cfn=" name a function
// (compressed names "(id) name" the first time, "(id)" after), a cost line
// is "position cost", and the line after "calls=" is the cost of that
// call.
func readCallgrind(r io.Reader) (cgProfile, error) {
	p := cgProfile{self: map[string]int64{}, calls: map[string]map[string]int64{}}
	names := map[string]string{}
	name := func(spec string) string {
		spec = strings.TrimSpace(spec)
		if !strings.HasPrefix(spec, "(") {
			return spec
		}
		id, rest, _ := strings.Cut(spec, ")")
		if rest = strings.TrimSpace(rest); rest != "" {
			names[id] = rest
		}
		return names[id]
	}
	var fn, callee string
	inCall := false
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "fn="):
			fn = name(line[3:])
		case strings.HasPrefix(line, "cfn="):
			callee = name(line[4:])
		case strings.HasPrefix(line, "calls="):
			inCall = true
		case line == "" || !isCostLine(line):
			// headers, ob=/fl=/fi=/fe=/cob=/cfi= lines, totals
		default:
			fields := strings.Fields(line)
			cost, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
			if err != nil || len(fields) != 2 {
				return cgProfile{}, fmt.Errorf("callgrind dump: cost line %q", line)
			}
			if inCall {
				if p.calls[fn] == nil {
					p.calls[fn] = map[string]int64{}
				}
				p.calls[fn][callee] += cost
				inCall = false
			} else {
				p.self[fn] += cost
			}
		}
	}
	return p, s.Err()
}

// isCostLine is a line that starts with a position: a number, or a
// relative one ("+3", "-2", "*").
func isCostLine(line string) bool {
	c := line[0]
	return c >= '0' && c <= '9' || c == '+' || c == '-' || c == '*'
}

// inclusive is fn's own cost and its calls': right for a function that
// never runs inside itself (no recursion).
func (p cgProfile) inclusive(fn string) int64 {
	n := p.self[fn]
	for _, c := range p.calls[fn] {
		n += c
	}
	return n
}

func (p cgProfile) total() int64 {
	var n int64
	for _, c := range p.self {
		n += c
	}
	return n
}

// selfWhere sums the own cost of the functions match accepts.
func (p cgProfile) selfWhere(match func(string) bool) int64 {
	var n int64
	for fn, c := range p.self {
		if match(fn) {
			n += c
		}
	}
	return n
}

// serverParts splits a Valkey server's instructions by what they did, in
// parts that do not overlap except where a name says "of which":
//   - cron: serverCron and other time events, the server's idle work;
//   - script: the whole script call (luaCallFunction), of which
//     keysArgs is KEYS and ARGV turned into Lua tables, redisCall every
//     redis.call (its arguments, the command and the reply into Lua),
//     of which commands is the commands themselves (scriptCall), and lua
//     the rest: the interpreter and its libraries;
//   - other: reading, parsing and answering the request, and the rest.
//
// Among the script's own work, by own cost: closures (luaF_*: a
// script's helpers are created anew on every call), strings (creating
// and concatenating Lua strings, the string library) and numbers
// (formatting and parsing numbers, in libc).
func serverParts(p cgProfile) map[string]int64 {
	parts := map[string]int64{
		"total":     p.total(),
		"cron":      p.inclusive("processTimeEvents"),
		"script":    p.inclusive("luaCallFunction"),
		"keysArgs":  p.inclusive("luaCreateArray"),
		"redisCall": p.inclusive("luaRedisGenericCommand"),
		"commands":  p.inclusive("scriptCall"),
		"closures":  p.selfWhere(func(fn string) bool { return strings.HasPrefix(fn, "luaF_") }),
		"strings": p.selfWhere(func(fn string) bool {
			return fn == "luaS_newlstr" || fn == "luaV_concat" || strings.HasPrefix(fn, "str_") || fn == "luaS_resize"
		}),
		"numbers": p.selfWhere(func(fn string) bool {
			return strings.Contains(fn, "printf") || strings.Contains(fn, "strtod") || fn == "hack_digit" ||
				strings.HasPrefix(fn, "__mpn_") || fn == "luaO_str2d"
		}),
		"gc": p.selfWhere(func(fn string) bool {
			return strings.HasPrefix(fn, "luaC_") || fn == "sweeplist" || fn == "propagatemark" || fn == "singlestep" ||
				fn == "reallymarkobject" || fn == "traversetable" || fn == "freeobj"
		}),
	}
	parts["lua"] = parts["script"] - parts["keysArgs"] - parts["redisCall"]
	parts["other"] = parts["total"] - parts["cron"] - parts["script"]
	return parts
}

// dumpParts reads the dumps of one operation's batches and adds up their
// serverParts.
func dumpParts(paths []string) (map[string]int64, error) {
	sum := map[string]int64{}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("opcost: %w", err)
		}
		p, err := readCallgrind(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("opcost: %s: %w", path, err)
		}
		for k, v := range serverParts(p) {
			sum[k] += v
		}
	}
	return sum, nil
}

// AddParts reads c's callgrind dumps and sets c.Parts: its instructions
// per call split by serverParts.
func AddParts(c *OpCost) error {
	if len(c.Dumps) == 0 || c.Calls == 0 {
		return nil
	}
	sum, err := dumpParts(c.Dumps)
	if err != nil {
		return err
	}
	c.Parts = map[string]float64{}
	for k, v := range sum {
		c.Parts[k] = float64(v) / float64(c.Calls)
	}
	return nil
}
