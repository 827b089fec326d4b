// Package lua holds the Valkey store's scripts, one file per RoutingStore
// operation, embedded in the binary. Each script is served whole: a
// generated header that names the keys it receives, the shared helpers of
// common.lua it uses, then the operation itself, so every rule is written
// once and every script is one atomic call.
//
// The key layout is part of this package because the scripts depend on it:
// every script receives the keys of Keys, in that order and under one
// hash-tagged prefix chosen by the caller, and scripts that remember their
// answer (see Script.Remembers) receive one more key after them.
package lua

import (
	"embed"
	"fmt"
	"regexp"
	"strings"
)

//go:embed *.lua
var files embed.FS

// Operation names, one per script file.
const (
	Enqueue        = "enqueue"
	Claim          = "claim"
	TakePayload    = "take_payload"
	Complete       = "complete"
	Release        = "release"
	Seal           = "seal"
	Cancel         = "cancel"
	CancelRequests = "cancel_requests"
	Renew          = "renew"
	Seen           = "seen"
	Touch          = "touch"
	Sweep          = "sweep"
	Now            = "now"
	Job            = "job"
	Jobs           = "jobs"
	Awaiting       = "awaiting"
	Finished       = "finished"
	Presence       = "presence"
	Everyone       = "everyone"
)

// Script is one operation ready to run.
type Script struct {
	// Name is the operation, one of the constants above.
	Name string
	// Source is the whole script: key header, shared helpers, operation.
	Source string
	// ReadOnly scripts change nothing and may run as EVALSHA_RO.
	ReadOnly bool
	// Remembers marks a write whose effect depends on the clock (a stamp or
	// an expiry). It takes a per-call request key after Keys and keeps its
	// answer there briefly, so that re-running the call with the same
	// arguments returns the same answer and changes nothing.
	Remembers bool
}

func isReadOnly(name string) bool {
	switch name {
	case Now, Job, Jobs, Awaiting, Finished, Presence, Everyone:
		return true
	}
	return false
}

func isRemembering(name string) bool {
	switch name {
	case Claim, Renew, Seen, Touch:
		return true
	}
	return false
}

// Names lists every operation.
func Names() []string {
	return []string{Enqueue, Claim, TakePayload, Complete, Release, Seal, Cancel, CancelRequests, Renew, Seen, Touch, Sweep,
		Now, Job, Jobs, Awaiting, Finished, Presence, Everyone}
}

// Keys names the fixed keys every script receives as KEYS, in order. The
// caller prefixes each with its key prefix; common.lua describes them.
func Keys() []string {
	return []string{"job", "payload", "result", "order", "queue", "deadline", "window", "lease",
		"awaiting", "finished", "cancels", "refusals", "seq", "clock", "presence", "paired"}
}

// Load returns the named operation's script.
func Load(name string) (Script, error) {
	body, err := files.ReadFile(name + ".lua")
	if err != nil || name == "common" {
		return Script{}, fmt.Errorf("lua: no script for operation %q", name)
	}
	common, err := files.ReadFile("common.lua")
	if err != nil {
		return Script{}, fmt.Errorf("lua: reading shared helpers: %w", err)
	}
	var b strings.Builder
	b.WriteString("-- relayd script: " + name + "\nlocal K = {\n")
	keys := Keys()
	for i, k := range keys {
		fmt.Fprintf(&b, "  %s = KEYS[%d],\n", k, i+1)
	}
	if isRemembering(name) {
		fmt.Fprintf(&b, "  req = KEYS[%d],\n", len(keys)+1)
	}
	b.WriteString("}\n")
	for _, d := range helpersFor(string(common), string(body)) {
		b.WriteString(d.text)
	}
	b.WriteString("\n-- operation: " + name + "\n")
	b.Write(body)
	return Script{Name: name, Source: b.String(), ReadOnly: isReadOnly(name), Remembers: isRemembering(name)}, nil
}

// A helper is one top-level definition of common.lua with the comment
// above it.
type helper struct {
	names []string
	text  string
}

var (
	luaComment  = regexp.MustCompile(`--[^\n]*`)
	topLevelDef = regexp.MustCompile(`^local (?:function ([A-Za-z_][A-Za-z0-9_]*)|([A-Za-z_][A-Za-z0-9_]*(?:, *[A-Za-z_][A-Za-z0-9_]*)*) *=)`)
	identifier  = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
)

// splitHelpers cuts common.lua into its top-level definitions, in order.
// Lines before the first definition (the file's own comment) are dropped.
func splitHelpers(common string) []helper {
	var out []helper
	var pending strings.Builder // comment and blank lines awaiting their definition
	for _, line := range strings.SplitAfter(common, "\n") {
		m := topLevelDef.FindStringSubmatch(line)
		switch {
		case m != nil:
			names := []string{m[1]}
			if m[1] == "" {
				names = strings.Split(strings.ReplaceAll(m[2], " ", ""), ",")
			}
			out = append(out, helper{names: names, text: pending.String() + line})
			pending.Reset()
		case strings.HasPrefix(line, "--") || strings.TrimSpace(line) == "":
			if len(out) > 0 || !strings.HasPrefix(line, "--") {
				pending.WriteString(line)
			}
		case len(out) > 0:
			// The body of the current definition; comments inside it were
			// taken as pending and belong to it too.
			out[len(out)-1].text += pending.String() + line
			pending.Reset()
		}
	}
	if len(out) > 0 {
		out[len(out)-1].text += pending.String()
	}
	return out
}

// helpersFor returns the helpers an operation uses, directly or through
// other helpers, in their order in common.lua (Lua locals must be defined
// before use). A script that runs less code to set itself up runs faster:
// every definition is executed on every call.
func helpersFor(common, body string) []helper {
	all := splitHelpers(common)
	defined := map[string]int{}
	for i, h := range all {
		for _, n := range h.names {
			defined[n] = i
		}
	}
	used := make([]bool, len(all))
	var mark func(text string)
	mark = func(text string) {
		for _, id := range identifier.FindAllString(luaComment.ReplaceAllString(text, ""), -1) {
			if i, ok := defined[id]; ok && !used[i] {
				used[i] = true
				mark(all[i].text)
			}
		}
	}
	mark(body)
	var out []helper
	for i, h := range all {
		if used[i] {
			out = append(out, h)
		}
	}
	return out
}
