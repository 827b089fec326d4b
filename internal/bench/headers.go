package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	vk "github.com/valkey-io/valkey-go"
)

// ScriptCost is what one variant of a served script costs the server per
// call: "definitions" is the script cut where its operation begins (the
// key table, the schema and the helpers it includes, then return 1);
// "memo" is the same that then runs answer_once around a trivial answer,
// for a script that remembers its answers.
type ScriptCost struct {
	Script              string  `json:"script"`
	Variant             string  `json:"variant"`
	Keys                int     `json:"keys"`
	Calls               int     `json:"calls"`
	InstructionsPerCall float64 `json:"instructionsPerCall,omitempty"`
}

// operationMarker starts the operation's own code in a served script
// (store/valkey/scripts.go, and store/lua at 7f63abf).
const operationMarker = "\n-- operation: "

var keyIndex = regexp.MustCompile(`KEYS\[(\d+)\]`)

// scriptVariants cuts a served script into the variants ScriptCost
// names, and says how many keys it reads.
func scriptVariants(source string) (map[string]string, int, error) {
	cut := strings.Index(source, operationMarker)
	if cut < 0 {
		return nil, 0, errors.New("no operation marker")
	}
	head := source[:cut+1]
	v := map[string]string{"definitions": head + "return 1\n"}
	if strings.Contains(head, "\nlocal REQ_ID") {
		v["memo"] = head + "return answer_once(function() return { 'ok' } end)\n"
	}
	keys := 0
	for _, m := range keyIndex.FindAllStringSubmatch(head, -1) {
		n, _ := strconv.Atoi(m[1])
		keys = max(keys, n)
	}
	return v, keys, nil
}

// MeasureScriptHeaders runs each variant of every served script in dir
// (one file per operation, as the store builds them) calls times, after
// memoWarmCalls calls to warm it, and reads the
// server's instructions per call when cg is set. Each call has a request
// id of its own, as a remembering write does, and twenty more arguments.
func MeasureScriptHeaders(ctx context.Context, addr, dir string, calls int, cg *Callgrind) ([]ScriptCost, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.lua"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("opcost: no scripts in %s", dir)
	}
	c, err := vk.NewClient(vk.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		return nil, fmt.Errorf("opcost: client: %w", err)
	}
	defer c.Close()
	var out []ScriptCost
	for _, file := range files {
		source, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("opcost: %w", err)
		}
		variants, keys, err := scriptVariants(string(source))
		if err != nil {
			return nil, fmt.Errorf("opcost: %s: %w", file, err)
		}
		for _, name := range []string{"definitions", "memo"} {
			if body, ok := variants[name]; ok {
				sc := ScriptCost{Script: strings.TrimSuffix(filepath.Base(file), ".lua"), Variant: name, Keys: keys, Calls: calls}
				if sc.InstructionsPerCall, err = measureScript(ctx, c, sc.Script+"-"+name, body, keys, calls, cg); err != nil {
					return nil, fmt.Errorf("opcost: %s %s: %w", sc.Script, name, err)
				}
				out = append(out, sc)
			}
		}
	}
	return out, nil
}

// memoWarmCalls fills a site's memo (512 answers) past wrapping before
// the measured calls, so they see a memo as a busy site's is.
const memoWarmCalls = 600

// measureScript runs one variant under keys of its own, so no variant
// meets another's memo.
func measureScript(ctx context.Context, c vk.Client, name, body string, keys, calls int, cg *Callgrind) (float64, error) {
	script := vk.NewLuaScript(body)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("opcost:{headers}:%s:key%02d", name, i+1)
	}
	run := func(round string, calls int) error {
		for i := range calls {
			args := append([]string{round + strconv.Itoa(i)}, strings.Split("abcdefghijklmnopqrst", "")...)
			if err := script.Exec(ctx, c, names, args).Error(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := run("warm-", memoWarmCalls); err != nil {
		return 0, err
	}
	if err := cg.control(ctx, "-z"); err != nil {
		return 0, err
	}
	if err := run("measured-", calls); err != nil {
		return 0, err
	}
	if cg == nil {
		return 0, nil
	}
	if err := cg.control(ctx, "-d"); err != nil {
		return 0, err
	}
	_, total, err := cg.awaitDump(ctx)
	return float64(total) / float64(calls), err
}
