package valkey

import (
	"fmt"
	"maps"
	"slices"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// operations holds every fact about each operation the store runs as a
// script, in one entry: how it may be retried, which keys it receives
// beyond the fixed ones, the code that runs before its own, and its
// arguments, whose params struct below names each one as the script reads
// it (argplan.go). Adding an argument to a script is one field in its
// params struct, set where the call is built, and read in the script as
// A.<name> (docs/architecture.md, "Adding an argument to a script"); a
// script reading a name its struct does not declare, or a declared name
// no script code reads, fails to load.
var operations = map[store.Op]opSpec{
	// Reads. A listing's reply may be large: valkey-go would re-run a
	// read-only script after a lost reply on a server that already spent
	// the time, so a listing runs as an ordinary script and its caller
	// polls again instead (once; see resent).
	store.OpNow:          {args: nowArgs{}, readOnly: true},
	store.OpJob:          {args: jobArgs{}, readOnly: true},
	store.OpPresence:     {args: presenceArgs{}, readOnly: true},
	store.OpJobs:         {args: jobsArgs{}, readOnly: true, listing: true},
	store.OpJobSummaries: {args: jobSummariesArgs{}, readOnly: true, listing: true},
	store.OpRunners:      {args: runnersArgs{}, readOnly: true, listing: true},
	store.OpPending:      {args: pendingArgs{}, readOnly: true, listing: true},
	store.OpResults:      {args: resultsArgs{}, readOnly: true, listing: true},
	opResultsVersion:     {args: resultsVersionArgs{}, readOnly: true},
	opResultBodies:       {args: resultBodiesArgs{}, readOnly: true, listing: true},
	opResultChanges:      {args: resultChangesArgs{}, readOnly: true},

	// The daemon plane's writes: remembered in the runner's memo, all but
	// renew, cancelRequests and settleGrants checking an admission.
	store.OpClaim:          {args: claimArgs{}, memo: runnerMemo, admits: true, routes: true, prelude: claimFirst},
	store.OpResult:         {args: resultArgs{}, memo: runnerMemo, admits: true},
	store.OpRelease:        {args: releaseArgs{}, memo: runnerMemo, admits: true},
	store.OpPair:           {args: pairArgs{}, memo: runnerMemo, admits: true},
	store.OpTouch:          {args: touchArgs{}, memo: runnerMemo, admits: true},
	store.OpHeartbeat:      {args: heartbeatArgs{}, memo: runnerMemo, admits: true},
	store.OpRenew:          {args: renewArgs{}, memo: runnerMemo},
	store.OpCancelRequests: {args: cancelRequestsArgs{}, memo: runnerMemo},
	store.OpSettleGrants: {args: settleGrantsArgs{},
		alike: "a re-run finds its granted jobs unheld and answers them again, and its released ones no longer held by the runner under those leases, so it acts on nothing (settleGrants.lua); a memo would cost it half its time"},
	store.OpFetch: {args: fetchArgs{}, admits: true,
		alike: "a re-run hands over the same payload and leaves a running job running"},

	// The site plane's writes, remembered in the site's memo; their
	// admissions only charge.
	store.OpEnqueue: {args: enqueueArgs{}, memo: siteMemo, admits: true},
	store.OpPayload: {args: payloadArgs{}, memo: siteMemo, admits: true},
	store.OpCancel:  {args: cancelArgs{}, memo: siteMemo, admits: true},

	store.OpSweep: {args: sweepArgs{},
		alike: "no caller keeps a memo, and the answer only feeds logs and metrics: a retried sweep answers what is due by then"},

	// Pending pairings (pairings.go).
	store.OpStartPairing: {args: startPairingArgs{}, memo: deviceMemo},
	store.OpDropPairing: {args: dropPairingArgs{},
		alike: "a re-run finds the code gone, and dropping an absent code is no error"},
	store.OpApprovePairing: {args: approvePairingArgs{},
		alike: "a re-run marks the same record approved again"},
	store.OpPairingByDeviceCode: {args: pairingByDeviceCodeArgs{},
		alike: "it changes nothing but judges expiry on the store clock"},
	store.OpPairingByUserCode: {args: pairingByUserCodeArgs{},
		alike: "it changes nothing but judges expiry on the store clock"},

	// The store's own steps.
	opBucket: {args: bucketArgs{}, bucket: true, neverResent: true,
		unwaited: "a failover that forgets a charge forgets only a rate-limit charge"},
	opRoutes: {args: routesArgs{}, routes: true,
		alike: "storing a claim's route list again stores the same set"},
	opHeld: {args: heldArgs{}, held: true, admits: true,
		alike: "raising a runner's buckets to the same times again changes nothing"},
	opHinted: {args: hintedArgs{}, held: true,
		alike:    "a re-run drops nothing more and answers the same hints",
		unwaited: "a failover that forgets a drop of past hints forgets nothing a claim needs"},
}

// opSpec is one operation's entry in operations.
type opSpec struct {
	// args is the zero value of the operation's params struct, which
	// declares its arguments.
	args opArgs
	// readOnly scripts change nothing and run as read-only scripts.
	readOnly bool
	// listing marks a read whose reply may be large (see operations).
	listing bool
	// memo names whose memo keeps a remembering write's answers (memo.go):
	// a write whose answer a re-run could not give again from the state
	// the first run left. It runs inside answer_once, receives its
	// caller's memo as one more key, and a request id before its
	// arguments. Every other write says why a re-run is safe: alike, or
	// neverResent.
	memo memoKind
	// alike says why a write keeping no memo answers a re-run as the
	// first run did.
	alike string
	// neverResent writes are never re-sent after a lost reply (their
	// scripts are not retryable): a limiter's charge, whose caller is
	// refused once rather than charged twice.
	neverResent bool
	// admits marks the operations that check an admission
	// (store.Admission) in their own script: every daemon-plane write but
	// those of a claim's aftermath, and the site plane's. Each receives
	// the rate bucket its admission may charge as one more key, after the
	// memo if it has one, and the admission's arguments (admissionArgs)
	// after the request id.
	admits bool
	// bucket marks a script that receives a rate bucket as K.bucket
	// without checking an admission (the Limiter's).
	bucket bool
	// routes marks the scripts that receive a claim's route list as
	// K.routes, the last key (routes.go).
	routes bool
	// held marks the scripts that receive a sorted set of buckets (a
	// runner's list, or an owner's route hints) as K.held, the last key
	// (sharded.go, hints.go).
	held bool
	// prelude runs before the admission and the operation's own code.
	prelude string
	// unwaited writes are not waited for by --valkey-wait-replicas
	// (replication.go): what a failover may forget of them is harmless.
	unwaited string
}

// takesBucket says the script receives K.bucket.
func (o opSpec) takesBucket() bool { return o.admits || o.bucket }

// memoKind names a kind of caller whose memo keeps answers.
type memoKind string

const (
	runnerMemo memoKind = "r"
	siteMemo   memoKind = "s"
	deviceMemo memoKind = "p"
)

// check fails an entry whose facts contradict each other.
func (o opSpec) check(op store.Op) error {
	switch {
	case o.args == nil || o.args.op() != op:
		return fmt.Errorf("valkey store: %s: its entry's arguments are not %s's", op, op)
	case o.readOnly && (o.memo != "" || o.admits || o.alike != "" || o.neverResent):
		return fmt.Errorf("valkey store: %s: a read keeps no memo, checks no admission and needs no retry rule", op)
	case o.listing && !o.readOnly:
		return fmt.Errorf("valkey store: %s: a listing is a read", op)
	case o.memo != "" && memoAnswers[o.memo] == 0:
		return fmt.Errorf("valkey store: %s: memo kind %q has no depth", op, o.memo)
	}
	rules := 0
	for _, is := range []bool{o.memo != "", o.alike != "", o.neverResent} {
		if is {
			rules++
		}
	}
	if !o.readOnly && rules != 1 {
		return fmt.Errorf("valkey store: %s: a write keeps a memo, answers alike or is never re-sent: one of the three", op)
	}
	return nil
}

// scripted lists the operations that run a script: all but Ping, which
// is the server's own PING, in name order.
func scripted() []store.Op {
	return slices.Sorted(maps.Keys(operations))
}

// opArgs is a params struct: its type names its operation, so a call is
// built from its arguments alone and cannot be sent to another script.
type opArgs interface{ op() store.Op }

// admissionArgs are an admission's arguments, which admit reads as
// ADMIT.<name> (store/lua/common/60_calls.lua); admitted packs them.
type admissionArgs struct {
	Runner        string `lua:"runner"`
	Paired        bool   `lua:"paired"`
	Owner         string `lua:"owner"`
	Device        string `lua:"device"`
	Charge        bool   `lua:"charge"`
	Every         int64  `lua:"every"`
	Burst         int    `lua:"burst"`
	Pair          bool   `lua:"pair"`
	PairOwner     string `lua:"pair_owner"`
	PairDevice    string `lua:"pair_device"`
	Caps          string `lua:"caps"`
	CapsGiven     bool   `lua:"caps_given"`
	Withheld      string `lua:"withheld"`
	WithheldGiven bool   `lua:"withheld_given"`
}

// The params structs, one per operation, in the order of the table. The
// scripts' header comments say what each argument means.

type nowArgs struct{}

type jobArgs struct {
	Site string `lua:"site"`
	ID   string `lua:"id"`
}

type presenceArgs struct {
	Runner string `lua:"runner"`
}

type jobsArgs struct {
	After string `lua:"after"`
	Page  int    `lua:"page"`
	Cap   int    `lua:"cap"`
}

type jobSummariesArgs struct {
	After string `lua:"after"`
	Page  int    `lua:"page"`
}

type runnersArgs struct {
	After string `lua:"after"`
	Page  int    `lua:"page"`
}

type pendingArgs struct {
	Site  string `lua:"site"`
	After string `lua:"after"`
	Page  int    `lua:"page"`
	Cap   int    `lua:"cap"`
}

type resultsArgs struct {
	Site  string `lua:"site"`
	After string `lua:"after"`
	Page  int    `lua:"page"`
	Cap   int    `lua:"cap"`
}

type resultsVersionArgs struct {
	Site string `lua:"site"`
}

type resultBodiesArgs struct {
	Site string   `lua:"site"`
	Cap  int      `lua:"cap"`
	IDs  []string `lua:"ids,tail"`
}

type resultChangesArgs struct {
	Site  string `lua:"site"`
	Since int64  `lua:"since"`
	Kind  string `lua:"kind"`
	After string `lua:"after"`
	Page  int    `lua:"page"`
}

type claimArgs struct {
	Runner       string      `lua:"runner"`
	Owner        string      `lua:"owner"`
	Device       string      `lua:"device"`
	LeaseMs      int64       `lua:"lease_ms"`
	WindowMs     int         `lua:"window_ms"`
	Max          int         `lua:"max"`
	SettleBudget int         `lua:"settle_budget"`
	Touch        bool        `lua:"touch"`
	Proto        store.Proto `lua:"proto"`
	HasRoutes    bool        `lua:"has_routes"`
	Hold         bool        `lua:"hold"`
	Kinds        []string    `lua:"kinds,counted"`
	Leases       []string    `lua:"leases,tail"`
}

type resultArgs struct {
	ID          string      `lua:"id"`
	Runner      string      `lua:"runner"`
	Lease       string      `lua:"lease"`
	Result      string      `lua:"result"`
	Disposition string      `lua:"disposition"`
	Touch       bool        `lua:"touch"`
	Sender      string      `lua:"sender"`
	Proto       store.Proto `lua:"proto"`
	Site        string      `lua:"site"`
	Sites       string      `lua:"sites"`
}

type releaseArgs struct {
	Runner string      `lua:"runner"`
	Reason string      `lua:"reason"`
	Proto  store.Proto `lua:"proto"`
	Site   string      `lua:"site"`
	Delay  int64       `lua:"delay"`
	Touch  bool        `lua:"touch"`
	Grants []string    `lua:"grants,tail"`
}

type pairArgs struct {
	Runner        string `lua:"runner"`
	Owner         string `lua:"owner"`
	Device        string `lua:"device"`
	Caps          string `lua:"caps"`
	CapsGiven     bool   `lua:"caps_given"`
	Withheld      string `lua:"withheld"`
	WithheldGiven bool   `lua:"withheld_given"`
}

type touchArgs struct {
	Runner string `lua:"runner"`
}

type heartbeatArgs struct {
	Runner  string      `lua:"runner"`
	Proto   store.Proto `lua:"proto"`
	Site    string      `lua:"site"`
	Touch   bool        `lua:"touch"`
	Serving bool        `lua:"serving"`
	LeaseMs int64       `lua:"lease_ms"`
	Batch   int         `lua:"batch"`
	Sites   string      `lua:"sites"`
	Grants  []string    `lua:"grants,tail"`
}

type renewArgs struct {
	Runner  string      `lua:"runner"`
	LeaseMs int64       `lua:"lease_ms"`
	Proto   store.Proto `lua:"proto"`
	Site    string      `lua:"site"`
	Grants  []string    `lua:"grants,tail"`
}

type cancelRequestsArgs struct {
	Runner string      `lua:"runner"`
	Proto  store.Proto `lua:"proto"`
}

type settleGrantsArgs struct {
	Runner  string   `lua:"runner"`
	Delay   int64    `lua:"delay"`
	Granted int      `lua:"granted"`
	Refused int      `lua:"refused"`
	Grants  []string `lua:"grants,tail"`
}

type fetchArgs struct {
	ID     string      `lua:"id"`
	Runner string      `lua:"runner"`
	Lease  string      `lua:"lease"`
	Touch  bool        `lua:"touch"`
	Proto  store.Proto `lua:"proto"`
	Site   string      `lua:"site"`
	Sites  string      `lua:"sites"`
}

type enqueueArgs struct {
	ID        string      `lua:"id"`
	Site      string      `lua:"site"`
	Stub      string      `lua:"stub"`
	Owner     string      `lua:"owner"`
	Kind      string      `lua:"kind"`
	OwnerOnly bool        `lua:"owner_only"`
	Deadline  int64       `lua:"deadline"`
	Proto     store.Proto `lua:"proto"`
}

type payloadArgs struct {
	ID        string `lua:"id"`
	Site      string `lua:"site"`
	Payload   string `lua:"payload"`
	Recipient string `lua:"recipient"`
}

type cancelArgs struct {
	ID   string `lua:"id"`
	Site string `lua:"site"`
}

type sweepArgs struct {
	Batch     int   `lua:"batch"`
	Mend      int   `lua:"mend"`
	MendEvery int64 `lua:"mend_every"`
}

type startPairingArgs struct {
	DeviceCode string `lua:"device_code"`
	UserCode   string `lua:"user_code"`
	Identity   string `lua:"identity"`
	Device     string `lua:"device"`
	Label      string `lua:"label"`
	Platform   string `lua:"platform"`
	Caps       string `lua:"caps"`
	TTLMs      int64  `lua:"ttl"`
	Capacity   int    `lua:"capacity"`
	Origin     string `lua:"origin"`
	Known      bool   `lua:"known"`
	PerDevice  int    `lua:"per_device"`
}

type dropPairingArgs struct {
	DeviceCode string `lua:"device_code"`
}

type approvePairingArgs struct {
	UserCode string `lua:"user_code"`
	Identity string `lua:"identity"`
}

type pairingByDeviceCodeArgs struct {
	DeviceCode string `lua:"device_code"`
}

type pairingByUserCodeArgs struct {
	UserCode string `lua:"user_code"`
}

type bucketArgs struct {
	Every int64 `lua:"every"`
	Burst int   `lua:"burst"`
}

type routesArgs struct {
	Fields []string `lua:"fields,tail"`
}

type hintedArgs struct{}

type heldArgs struct {
	Ahead int64    `lua:"ahead"`
	Pairs []string `lua:"pairs,tail"`
}

func (nowArgs) op() store.Op                 { return store.OpNow }
func (jobArgs) op() store.Op                 { return store.OpJob }
func (presenceArgs) op() store.Op            { return store.OpPresence }
func (jobsArgs) op() store.Op                { return store.OpJobs }
func (jobSummariesArgs) op() store.Op        { return store.OpJobSummaries }
func (runnersArgs) op() store.Op             { return store.OpRunners }
func (pendingArgs) op() store.Op             { return store.OpPending }
func (resultsArgs) op() store.Op             { return store.OpResults }
func (resultsVersionArgs) op() store.Op      { return opResultsVersion }
func (resultBodiesArgs) op() store.Op        { return opResultBodies }
func (resultChangesArgs) op() store.Op       { return opResultChanges }
func (claimArgs) op() store.Op               { return store.OpClaim }
func (resultArgs) op() store.Op              { return store.OpResult }
func (releaseArgs) op() store.Op             { return store.OpRelease }
func (pairArgs) op() store.Op                { return store.OpPair }
func (touchArgs) op() store.Op               { return store.OpTouch }
func (heartbeatArgs) op() store.Op           { return store.OpHeartbeat }
func (renewArgs) op() store.Op               { return store.OpRenew }
func (cancelRequestsArgs) op() store.Op      { return store.OpCancelRequests }
func (settleGrantsArgs) op() store.Op        { return store.OpSettleGrants }
func (fetchArgs) op() store.Op               { return store.OpFetch }
func (enqueueArgs) op() store.Op             { return store.OpEnqueue }
func (payloadArgs) op() store.Op             { return store.OpPayload }
func (cancelArgs) op() store.Op              { return store.OpCancel }
func (sweepArgs) op() store.Op               { return store.OpSweep }
func (startPairingArgs) op() store.Op        { return store.OpStartPairing }
func (dropPairingArgs) op() store.Op         { return store.OpDropPairing }
func (approvePairingArgs) op() store.Op      { return store.OpApprovePairing }
func (pairingByDeviceCodeArgs) op() store.Op { return store.OpPairingByDeviceCode }
func (pairingByUserCodeArgs) op() store.Op   { return store.OpPairingByUserCode }
func (bucketArgs) op() store.Op              { return opBucket }
func (routesArgs) op() store.Op              { return opRoutes }
func (heldArgs) op() store.Op                { return opHeld }
func (hintedArgs) op() store.Op              { return opHinted }

// leasePairs flattens leases into the (job id, lease id) pairs a tail of
// grants carries.
func leasePairs(lists ...[]protocol.LeaseRef) []string {
	n := 0
	for _, l := range lists {
		n += 2 * len(l)
	}
	out := make([]string, 0, n)
	for _, list := range lists {
		for _, l := range list {
			out = append(out, l.JobID, l.LeaseID)
		}
	}
	return out
}

// newCall builds a call of p's operation with the fixed keys and p's
// arguments; a remembering write is built by newWrite instead, and an
// admitting one is passed through admitted before it is sent.
func (s *Store) newCall(p opArgs) call {
	return s.build(p, "", false)
}

// newWrite builds a call of p's remembering write by caller: the fixed
// keys and the caller's memo, then a fresh request id before p's
// arguments. A client's retry re-sends the same call, so the id names the
// call, not the attempt.
func (s *Store) newWrite(caller string, p opArgs) call {
	return s.build(p, caller, true)
}

// build packs p into a call. A call built against its entry (newCall for
// a remembering write, newWrite for any other, an admitting write not
// passed through admitted) carries an error that exec returns: it would
// feed the script its arguments at the wrong places.
func (s *Store) build(p opArgs, caller string, remembered bool) call {
	op := p.op()
	sc := s.scripts[op]
	keys := s.opKeys[op]
	c := call{op: op, keys: keys, unadmitted: sc.admit != nil}
	if sc.remembers != remembered {
		c.err = fmt.Errorf("valkey store: %s: built as remembering %v, its entry says %v", op, remembered, sc.remembers)
		return c
	}
	n := 16 + len(sc.args.fields)
	if sc.remembers {
		c.keys = append(append(make([]string, 0, len(keys)+2), keys...), s.memoKey(op, caller))
		c.args = append(make([]string, 0, n+1), newRequestID())
	} else {
		c.args = make([]string, 0, n)
	}
	c.args = sc.args.pack(c.args, p)
	return c
}
