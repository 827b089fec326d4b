package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	vk "github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/protocol"
)

// OpCost is what one kind of store operation costs the Valkey server,
// measured over a batch of calls of that kind alone: the commands the
// server ran per call (the script itself and every redis.call inside it,
// from INFO commandstats) and, when the server runs under callgrind, the
// instructions it executed per call. Instruction counts do not depend on
// how loaded the machine is, so two builds compare on a shared machine.
type OpCost struct {
	Op    string `json:"op"`
	Calls int    `json:"calls"`
	// Commands is the server's commands per call, by command name
	// ("evalsha", "hget", ...), scripts' inner calls included.
	Commands map[string]float64 `json:"commandsPerCall"`
	// MicrosPerCall is the server's usec per call of the operation's
	// outer commands (EVALSHA or FCALL, and any plain command the store sends),
	// from commandstats: wall time, so noisy on a loaded machine.
	MicrosPerCall float64 `json:"usecPerCall"`
	// InstructionsPerCall is callgrind's total for the batch over Calls:
	// everything the server did, reading and answering included.
	InstructionsPerCall float64 `json:"instructionsPerCall,omitempty"`
	// Dumps are the callgrind dumps of the batches, one a round, for
	// callgrind_annotate.
	Dumps []string `json:"callgrindDumps,omitempty"`
	// Parts splits InstructionsPerCall by what the server was doing
	// (serverParts); set by AddParts.
	Parts map[string]float64 `json:"instructionsPerCallBy,omitempty"`
}

// Callgrind names a valkey-server running under valgrind --tool=callgrind
// with --callgrind-out-file=OutFile, so each batch can be zeroed before
// and dumped after (callgrind_control -z, -d).
type Callgrind struct {
	PID     int
	OutFile string
	// lastDump is the number of the last dump read.
	lastDump int
}

// OpCostOptions says what to measure.
type OpCostOptions struct {
	Addr  string
	Calls int
	// Round is the calls of each operation in one round (default: all of
	// them): a round runs every step in turn, so its claims still await
	// their payloads (protocol.AwaitingPayloadMs) when the payload batch
	// reaches them, however slow the server is under callgrind.
	Round int
	// Only, when not empty, keeps just these operations (setup still runs
	// every earlier step the kept ones need).
	Only      []string
	Callgrind *Callgrind
}

// opDriver drives one store's operations as the lifecycle uses them, for
// one runner of one owner. A store version has its own driver (its API
// names differ); errNotInStore marks an operation that version lacks.
type opDriver interface {
	enqueue(ctx context.Context, site, id string, deadline int64) error
	presence(ctx context.Context) error
	claim(ctx context.Context, site string) (jobID, leaseID string, err error)
	payload(ctx context.Context, site, jobID string, deadline int64) error
	fetch(ctx context.Context, site, jobID, leaseID string) error
	touch(ctx context.Context) error
	heartbeat(ctx context.Context) error
	result(ctx context.Context, site, jobID, leaseID string, deadline int64) error
	sweep(ctx context.Context) error
	pending(ctx context.Context, site string) error
	results(ctx context.Context, site string) error
	close()
}

var errNotInStore = errors.New("this store version has no such operation")

// The main site's jobs go through the lifecycle one step per batch; the
// listing site holds a few jobs awaiting a payload and a few results, so
// its listings are of the small size a polling site sees.
const (
	opSite      = "site-opcost"
	listingSite = "site-opcost-listing"
	listingJobs = 2
	// opLeaseMs is the lease and sealing window: an hour, since a batch
	// of claims under callgrind can take longer than a real lease before
	// the payload batch reaches its jobs.
	opLeaseMs = 3_600_000
)

// opCostPlan is the batches in the order the lifecycle needs them: each
// step's jobs are the previous step's. call runs call i of the batch.
type opCostStep struct {
	op   string
	call func(ctx context.Context, d opDriver, i int) error
}

func opCostPlan(admin vk.Client, deadline int64, leases map[int][2]string) []opCostStep {
	id := func(i int) string { return "opcost-" + strconv.Itoa(i) }
	lease := func(i int) (string, string) { l := leases[i]; return l[0], l[1] }
	trivial := vk.NewLuaScript("return 1")
	return []opCostStep{
		// The floor: a script that does nothing, through the same client.
		{"trivial", func(ctx context.Context, _ opDriver, _ int) error { return trivial.Exec(ctx, admin, nil, nil).Error() }},
		{"enqueue", func(ctx context.Context, d opDriver, i int) error { return d.enqueue(ctx, opSite, id(i), deadline) }},
		{"presence", func(ctx context.Context, d opDriver, _ int) error { return d.presence(ctx) }},
		{"claim", func(ctx context.Context, d opDriver, i int) error {
			job, l, err := d.claim(ctx, opSite)
			leases[i] = [2]string{job, l}
			return err
		}},
		{"payload", func(ctx context.Context, d opDriver, i int) error {
			job, _ := lease(i)
			return d.payload(ctx, opSite, job, deadline)
		}},
		{"fetch", func(ctx context.Context, d opDriver, i int) error {
			job, l := lease(i)
			return d.fetch(ctx, opSite, job, l)
		}},
		{"touch", func(ctx context.Context, d opDriver, _ int) error { return d.touch(ctx) }},
		{"heartbeat", func(ctx context.Context, d opDriver, _ int) error { return d.heartbeat(ctx) }},
		{"result", func(ctx context.Context, d opDriver, i int) error {
			job, l := lease(i)
			return d.result(ctx, opSite, job, l, deadline)
		}},
		{"sweep", func(ctx context.Context, d opDriver, _ int) error { return d.sweep(ctx) }},
		{"pending", func(ctx context.Context, d opDriver, _ int) error { return d.pending(ctx, listingSite) }},
		{"results", func(ctx context.Context, d opDriver, _ int) error { return d.results(ctx, listingSite) }},
	}
}

// MeasureOpCosts runs o.Calls calls of each store operation of the per-job
// mix, one kind at a time and one call at a time, against the Valkey at
// o.Addr, and reports each kind's cost to the server.
func MeasureOpCosts(ctx context.Context, o OpCostOptions) ([]OpCost, error) {
	if o.Calls < 1 {
		return nil, errors.New("opcost: at least one call per operation is needed")
	}
	prefix := fmt.Sprintf("opcost:{%d}:", time.Now().UnixNano())
	d, err := newOpDriver(ctx, o.Addr, prefix)
	if err != nil {
		return nil, fmt.Errorf("opcost: %w", err)
	}
	defer d.close()
	admin, err := vk.NewClient(vk.ClientOption{InitAddress: []string{o.Addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		return nil, fmt.Errorf("opcost: admin client: %w", err)
	}
	defer admin.Close()
	deadline := time.Now().Add(time.Hour).UnixMilli()
	if err := fillListingSite(ctx, d, deadline); err != nil {
		return nil, err
	}
	round := o.Round
	if round < 1 || round > o.Calls {
		round = o.Calls
	}
	plan := opCostPlan(admin, deadline, map[int][2]string{})
	sums := make([]batch, len(plan))
	for from := 0; from < o.Calls; from += round {
		n := min(round, o.Calls-from)
		for i, step := range plan {
			keep := len(o.Only) == 0 || contains(o.Only, step.op)
			b, err := runBatch(ctx, admin, d, step, from, n, o.Callgrind, keep)
			if errors.Is(err, errNotInStore) {
				continue
			}
			if err != nil {
				return nil, err
			}
			sums[i].add(b)
		}
	}
	var costs []OpCost
	for i, step := range plan {
		if sums[i].calls == 0 {
			continue
		}
		c := sums[i].cost(step.op)
		if err := AddParts(&c); err != nil {
			return nil, err
		}
		costs = append(costs, c)
	}
	return costs, nil
}

// fillListingSite leaves the listing site with listingJobs jobs awaiting
// their payload and listingJobs results, claimed and answered from the
// listing site alone.
func fillListingSite(ctx context.Context, d opDriver, deadline int64) error {
	for i := range 2 * listingJobs {
		if err := d.enqueue(ctx, listingSite, "listing-"+strconv.Itoa(i), deadline); err != nil {
			return fmt.Errorf("opcost: listing site: %w", err)
		}
	}
	for range listingJobs {
		job, lease, err := d.claim(ctx, listingSite)
		if err == nil {
			err = d.payload(ctx, listingSite, job, deadline)
		}
		if err == nil {
			err = d.fetch(ctx, listingSite, job, lease)
		}
		if err == nil {
			err = d.result(ctx, listingSite, job, lease, deadline)
		}
		if err != nil {
			return fmt.Errorf("opcost: listing site: %w", err)
		}
	}
	return nil
}

// batch is what the server did for n calls of one operation (or for the
// sum of several rounds' batches of it).
type batch struct {
	calls        int
	instructions int64
	stats        map[string]commandStat
	dumps        []string
}

func (b *batch) add(o batch) {
	b.calls += o.calls
	b.instructions += o.instructions
	b.dumps = append(b.dumps, o.dumps...)
	if b.stats == nil {
		b.stats = map[string]commandStat{}
	}
	for name, s := range o.stats {
		t := b.stats[name]
		b.stats[name] = commandStat{calls: t.calls + s.calls, usec: t.usec + s.usec}
	}
}

func (b batch) cost(op string) OpCost {
	c := OpCost{Op: op, Calls: b.calls, Dumps: b.dumps}
	c.Commands, c.MicrosPerCall = perCall(b.stats, b.calls)
	if len(b.dumps) > 0 {
		c.InstructionsPerCall = float64(b.instructions) / float64(b.calls)
	}
	return c
}

// runBatch runs calls from..from+n-1 of one step. A batch that is not
// kept still runs, since later steps need its jobs, but is not measured.
func runBatch(ctx context.Context, admin vk.Client, d opDriver, step opCostStep, from, n int, cg *Callgrind, keep bool) (batch, error) {
	if keep {
		if err := admin.Do(ctx, admin.B().ConfigResetstat().Build()).Error(); err != nil {
			return batch{}, fmt.Errorf("opcost: %s: reset stats: %w", step.op, err)
		}
		if err := cg.control(ctx, "-z"); err != nil {
			return batch{}, err
		}
	}
	for i := from; i < from+n; i++ {
		if err := step.call(ctx, d, i); err != nil {
			return batch{}, fmt.Errorf("opcost: %s call %d: %w", step.op, i, err)
		}
	}
	if !keep {
		return batch{}, nil
	}
	b := batch{calls: n}
	if cg != nil {
		if err := cg.control(ctx, "-d"); err != nil {
			return batch{}, err
		}
		dump, total, err := cg.awaitDump(ctx)
		if err != nil {
			return batch{}, err
		}
		b.instructions, b.dumps = total, []string{dump}
	}
	text, err := admin.Do(ctx, admin.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		return batch{}, fmt.Errorf("opcost: %s: commandstats: %w", step.op, err)
	}
	b.stats = parseCommandStats(text)
	return b, nil
}

// commandStat is one command's line of INFO commandstats.
type commandStat struct {
	calls int64
	usec  int64
}

// parseCommandStats reads INFO commandstats lines such as
// "cmdstat_evalsha:calls=3,usec=120,usec_per_call=40.00,...". Subcommands
// ("cmdstat_config|resetstat") keep their full name.
func parseCommandStats(info string) map[string]commandStat {
	stats := map[string]commandStat{}
	for _, line := range strings.Split(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var s commandStat
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				s.calls = n
			case "usec":
				s.usec = n
			}
		}
		stats[strings.TrimPrefix(name, "cmdstat_")] = s
	}
	return stats
}

// perCall turns a batch's command counts into counts per call, leaving out
// the measurement's own commands, and sums the server time of the outer
// commands: a script's EVALSHA or FCALL, whose time includes its inner calls
// (which commandstats also counts apart), or else every command.
func perCall(stats map[string]commandStat, calls int) (map[string]float64, float64) {
	per := map[string]float64{}
	var scripts, all int64
	for name, s := range stats {
		if strings.HasPrefix(name, "config") || strings.HasPrefix(name, "info") || name == "ping" {
			continue
		}
		per[name] = float64(s.calls) / float64(calls)
		all += s.usec
		if strings.HasPrefix(name, "eval") || strings.HasPrefix(name, "fcall") { // evalsha(_ro), eval(_ro), fcall(_ro)
			scripts += s.usec
		}
	}
	if scripts == 0 { // an operation of plain commands only
		scripts = all
	}
	return per, float64(scripts) / float64(calls)
}

// control sends callgrind_control one command for the server; nil c (no
// callgrind) does nothing.
func (c *Callgrind) control(ctx context.Context, arg string) error {
	if c == nil {
		return nil
	}
	out, err := exec.CommandContext(ctx, "callgrind_control", arg, strconv.Itoa(c.PID)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("opcost: callgrind_control %s: %w: %s", arg, err, out)
	}
	return nil
}

// newestDump finds the latest numbered dump of the out file (OutFile.1,
// OutFile.2, ...) and reads its instruction total.
func (c *Callgrind) newestDump() (string, int64, error) {
	matches, err := filepath.Glob(c.OutFile + ".*")
	if err != nil {
		return "", 0, fmt.Errorf("opcost: callgrind dumps: %w", err)
	}
	sort.Slice(matches, func(i, j int) bool { return dumpNumber(matches[i]) < dumpNumber(matches[j]) })
	if len(matches) == 0 {
		return "", 0, fmt.Errorf("opcost: no callgrind dump named %s.N", c.OutFile)
	}
	path := matches[len(matches)-1]
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("opcost: callgrind dump: %w", err)
	}
	defer f.Close()
	total, err := callgrindTotal(bufio.NewScanner(f))
	if err != nil {
		return "", 0, fmt.Errorf("opcost: %s: %w", path, err)
	}
	return path, total, nil
}

func dumpNumber(path string) int {
	n, _ := strconv.Atoi(path[strings.LastIndexByte(path, '.')+1:])
	return n
}

// callgrindTotal reads the first event's count from a dump's "totals:"
// line, written last, or else its "summary:" line.
func callgrindTotal(s *bufio.Scanner) (int64, error) {
	found := map[string]string{}
	for s.Scan() {
		for _, key := range []string{"totals:", "summary:"} {
			if rest, ok := strings.CutPrefix(s.Text(), key); ok {
				found[key] = rest
			}
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	for _, key := range []string{"totals:", "summary:"} {
		if rest, ok := found[key]; ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return 0, errors.New("empty " + key + " line")
			}
			return strconv.ParseInt(fields[0], 10, 64)
		}
	}
	return 0, errors.New("no totals line")
}

// awaitDump waits for the dump after the last one read: callgrind_control
// can return before valgrind has written it.
func (c *Callgrind) awaitDump(ctx context.Context) (string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		dump, total, err := c.newestDump()
		if err == nil && dumpNumber(dump) > c.lastDump {
			c.lastDump = dumpNumber(dump)
			return dump, total, nil
		}
		select {
		case <-ctx.Done():
			return "", 0, fmt.Errorf("opcost: no callgrind dump after %s.%d: %v", c.OutFile, c.lastDump, err)
		case <-tick.C:
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// opParty is the one runner, owner and device the batches route jobs for,
// built as the limit scenario builds its workers' (saturateWorker).
type opParty struct {
	runner, owner string
	device        protocol.PublicIdentity
	deviceKeyID   string
	ciphertext    string
}

func newOpParty() opParty {
	p := opParty{runner: "opcost-runner", owner: "opcost-owner"}
	identity := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%-32s", p.runner)))
	p.device = protocol.PublicIdentity{Identity: identity, Encryption: "enc-" + p.runner, EncryptionSig: "sig-" + p.runner}
	p.deviceKeyID, _ = protocol.KeyIDOf(identity)
	// A fixed ciphertext of the limit scenario's size, so two runs store
	// the same bytes.
	p.ciphertext = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, 256))
	return p
}

func (p opParty) stub(id string, deadline int64) protocol.JobStub {
	return protocol.JobStub{ID: id, Kind: protocol.KindGenerate, Owner: p.owner, Site: "site-key", Audience: protocol.AudiencePublic,
		SizeClass: "small", DeadlineAt: deadline}
}

func (p opParty) envelope(dir string, deadline int64) protocol.SealedEnvelope {
	e := protocol.SealedEnvelope{Ciphertext: p.ciphertext, RecipientKeyID: p.deviceKeyID, SenderKeyID: "site-key",
		Direction: dir, DeadlineAt: deadline}
	if dir == protocol.DirectionResult {
		e.RecipientKeyID, e.SenderKeyID = e.SenderKeyID, e.RecipientKeyID
	}
	return e
}
