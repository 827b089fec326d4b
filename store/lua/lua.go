// Package lua holds the Valkey store's scripts, one file per RoutingStore
// operation, embedded in the binary. Each script is served whole: a
// generated header that names the keys it receives, the shared helpers of
// common.lua, then the operation itself, so every rule is written once and
// every script is one atomic call.
//
// The key layout is part of this package because the scripts depend on it:
// every script receives the keys of Keys, in that order and under one
// hash-tagged prefix chosen by the caller, and scripts that remember their
// answer (see Script.Remembers) receive one more key after them.
package lua

import (
	"embed"
	"fmt"
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
	b.Write(common)
	b.WriteString("\n-- operation: " + name + "\n")
	b.Write(body)
	return Script{Name: name, Source: b.String(), ReadOnly: isReadOnly(name), Remembers: isRemembering(name)}, nil
}
