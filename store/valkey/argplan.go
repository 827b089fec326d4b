package valkey

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A script's arguments are declared once, as the fields of a Go params
// struct (ops.go), each tagged with the name the script reads it by:
//
//	Runner string   `lua:"runner"`        A.runner, the string as sent
//	Touch  bool     `lua:"touch"`         A.touch, '1' or '0'
//	Max    int      `lua:"max"`           A.max, in decimal
//	Kinds  []string `lua:"kinds,counted"` A.kinds, a Lua list (sent as its count, then its items)
//	Leases []string `lua:"leases,tail"`   A.leases, the ARGV index of the first item
//
// One plan per struct packs its fields into ARGV in field order (pack) and
// writes the Lua binding of their names to their places (binding). Single
// values come first, then counted lists, then at most one tail, which runs
// to the end of ARGV: a tail is bound to where it starts, not copied, for
// it may be long (every route of a claim, every lease of a heartbeat).

// argKind is how a field travels in ARGV.
type argKind int

const (
	argString argKind = iota
	argFlag
	argInt
	argCounted
	argTail
)

// argField is one declared argument: its Lua name, the struct field it
// is read from, and how it travels.
type argField struct {
	name  string
	field int
	kind  argKind
}

// argPlan is the layout of one params struct in ARGV.
type argPlan struct {
	typ    reflect.Type
	fields []argField
}

var luaArgName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// planOf reads the layout of the params struct v from its tags.
func planOf(v any) (*argPlan, error) {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("arguments %T: not a struct", v)
	}
	p := &argPlan{typ: t}
	for i := range t.NumField() {
		f, err := fieldOf(t.Field(i), i)
		if err != nil {
			return nil, fmt.Errorf("arguments %s: %w", t.Name(), err)
		}
		if n := len(p.fields); n > 0 && f.kind < p.fields[n-1].kind && !(f.kind <= argInt && p.fields[n-1].kind <= argInt) {
			return nil, fmt.Errorf("arguments %s: %s comes after a list: values first, then counted lists, then one tail", t.Name(), f.name)
		}
		if n := len(p.fields); n > 0 && p.fields[n-1].kind == argTail {
			return nil, fmt.Errorf("arguments %s: %s comes after the tail", t.Name(), f.name)
		}
		if slices.ContainsFunc(p.fields, func(g argField) bool { return g.name == f.name }) {
			return nil, fmt.Errorf("arguments %s: %s is declared twice", t.Name(), f.name)
		}
		p.fields = append(p.fields, f)
	}
	return p, nil
}

// fieldOf reads one struct field's declaration.
func fieldOf(sf reflect.StructField, i int) (argField, error) {
	tag, ok := sf.Tag.Lookup("lua")
	name, opt, _ := strings.Cut(tag, ",")
	if !ok || !luaArgName.MatchString(name) {
		return argField{}, fmt.Errorf("field %s has no lua:\"name\" tag naming it in Lua", sf.Name)
	}
	f := argField{name: name, field: i}
	switch k := sf.Type.Kind(); {
	case k == reflect.String && opt == "":
		f.kind = argString
	case k == reflect.Bool && opt == "":
		f.kind = argFlag
	case k >= reflect.Int && k <= reflect.Int64 && opt == "":
		f.kind = argInt
	case k == reflect.Slice && sf.Type.Elem().Kind() == reflect.String && opt == "counted":
		f.kind = argCounted
	case k == reflect.Slice && sf.Type.Elem().Kind() == reflect.String && opt == "tail":
		f.kind = argTail
	default:
		return argField{}, fmt.Errorf("field %s: type %s with %q is not an argument (string, bool, int, or []string counted or tail)", sf.Name, sf.Type, opt)
	}
	return f, nil
}

// pack appends v's fields to dst in ARGV order. v must be of the plan's
// type; the operations table ties each type to its plan, so it is.
func (p *argPlan) pack(dst []string, v any) []string {
	rv := reflect.ValueOf(v)
	for _, f := range p.fields {
		fv := rv.Field(f.field)
		switch f.kind {
		case argString:
			dst = append(dst, fv.String())
		case argFlag:
			dst = append(dst, flag(fv.Bool()))
		case argInt:
			dst = append(dst, strconv.FormatInt(fv.Int(), 10))
		case argCounted:
			dst = append(dst, strconv.Itoa(fv.Len()))
			dst = append(dst, fv.Interface().([]string)...)
		case argTail:
			dst = append(dst, fv.Interface().([]string)...)
		}
	}
	return dst
}

// pos is the place of the single value name among the plan's arguments
// (0 for the first), or -1.
func (p *argPlan) pos(name string) int {
	for i, f := range p.fields {
		if f.name == name && f.kind <= argInt {
			return i
		}
	}
	return -1
}

// names are the Lua names the plan declares.
func (p *argPlan) names() []string {
	out := make([]string, len(p.fields))
	for i, f := range p.fields {
		out[i] = f.name
	}
	return out
}

// binding is the Lua that binds the table named table to the arguments,
// whose first is ARGV[first]: the single values and a tail that follows
// them at once in the table's constructor, the lists after a counted one
// by walking ARGV.
func (p *argPlan) binding(table string, first int) string {
	if len(p.fields) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("local " + table + " = {\n")
	at := first
	i := 0
	for ; i < len(p.fields) && p.fields[i].kind != argCounted; i++ {
		f := p.fields[i]
		if f.kind == argTail {
			fmt.Fprintf(&b, "  %s = %d,\n", f.name, at)
			continue
		}
		fmt.Fprintf(&b, "  %s = ARGV[%d],\n", f.name, at)
		at++
	}
	b.WriteString("}\n")
	if i == len(p.fields) {
		return b.String()
	}
	fmt.Fprintf(&b, "do\n  local at = %d\n", at)
	for _, f := range p.fields[i:] {
		if f.kind == argTail {
			fmt.Fprintf(&b, "  %s.%s = at\n", table, f.name)
			continue
		}
		fmt.Fprintf(&b, "  %[1]s.%[2]s = {}\n  for i = 1, tonumber(ARGV[at]) do\n    %[1]s.%[2]s[i] = ARGV[at + i]\n  end\n  at = at + 1 + #%[1]s.%[2]s\n", table, f.name)
	}
	b.WriteString("end\n")
	return b.String()
}

// argRef matches a read of an argument by name: A.<name> or ADMIT.<name>.
var argRef = regexp.MustCompile(`\b(A|ADMIT)\.([A-Za-z_][A-Za-z0-9_]*)`)

// argUses finds the names code (comments stripped) reads, by table.
func argUses(code string) map[string]map[string]bool {
	out := map[string]map[string]bool{"A": {}, "ADMIT": {}}
	for _, m := range argRef.FindAllStringSubmatch(code, -1) {
		out[m[1]][m[2]] = true
	}
	return out
}

// argsAgree fails unless used, the names read from the table named
// table, are exactly those the plan declares: a name the Go side does not
// send, or a name it sends that the script never reads, is a mismatch.
func argsAgree(table string, p *argPlan, used map[string]bool) error {
	var unread, undeclared []string
	for _, n := range p.names() {
		if !used[n] {
			unread = append(unread, table+"."+n)
		}
	}
	for n := range used {
		if !slices.Contains(p.names(), n) {
			undeclared = append(undeclared, table+"."+n)
		}
	}
	slices.Sort(undeclared)
	var problems []string
	if len(unread) > 0 {
		problems = append(problems, strings.Join(unread, ", ")+" declared by "+p.typ.Name()+" and never read")
	}
	if len(undeclared) > 0 {
		problems = append(problems, strings.Join(undeclared, ", ")+" read but not declared by "+p.typ.Name())
	}
	if len(problems) > 0 {
		return fmt.Errorf("arguments disagree: %s", strings.Join(problems, "; "))
	}
	return nil
}

// argvByPlace matches ARGV read by a literal place, which the named
// bindings replace.
var argvByPlace = regexp.MustCompile(`ARGV\[\s*\d+\s*\]`)
