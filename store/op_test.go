package store_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/byollm/relayd/store"
)

// TestOpsNameEveryMethod: each RoutingStore and Pairings method but Close
// is one Op, named as the method with its first letter lowered, and nothing
// else is.
func TestOpsNameEveryMethod(t *testing.T) {
	var want []string
	for _, iface := range []reflect.Type{reflect.TypeFor[store.RoutingStore](), reflect.TypeFor[store.Pairings]()} {
		for i := range iface.NumMethod() {
			name := iface.Method(i).Name
			if name == "Close" {
				continue
			}
			want = append(want, string(unicode.ToLower(rune(name[0])))+name[1:])
		}
	}
	var got []string
	for _, op := range append(store.Ops(), store.PairingOps()...) {
		got = append(got, op.String())
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("ops %v, want one per method: %v", got, want)
	}
	if strings.Contains(strings.Join(got, ","), "_") {
		t.Error("an op name is not the wire's camelCase")
	}
}
