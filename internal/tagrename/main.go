// Command tagrename gives every spec tag in the repository's Go and
// Markdown files the prefix of the document it comes from, as
// docs/glossary.md sets out: RB- for relay-behaviour.md, P2- for
// protocol-2.md, RD- for relayd's own decisions. A bare D1 becomes
// P2-D1 or RB-D1 by its context, TestD1_… becomes TestP2_D1_…, and the
// contract case "D12_…" becomes "RD_D12_…".
//
// It decides each tag from, in order: a line override in rules.go, the
// tag's family and number when they name one document, the other tags on
// the same line, and the file's default for the ambiguous families. A
// tag none of these decide is reported and left as it is.
//
// Run it anywhere in the repository (it works on the whole work tree):
//
//	go run ./internal/tagrename        # list what it would change
//	go run ./internal/tagrename -w     # change the files
//
// It exits 1 when any tag is unclassified. A second run changes nothing:
// a prefixed tag is no longer a bare one.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	write := flag.Bool("w", false, "write the renamed files (default: only list the changes)")
	quiet := flag.Bool("q", false, "list only the unclassified tags and the totals")
	skipped := flag.Bool("v", false, "also list the tag-like words left alone as not tags, and why")
	flag.Parse()
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tagrename:", err)
		os.Exit(2)
	}
	code, err := run(os.Stdout, root, options{write: *write, quiet: *quiet, skipped: *skipped})
	if err != nil {
		fmt.Fprintln(os.Stderr, "tagrename:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	write, quiet, skipped bool
}

// run renames (or, without write, lists) every file's tags and returns
// the exit code: 1 when a tag was left unclassified.
func run(out io.Writer, root string, o options) (int, error) {
	files, err := trackedFiles(root)
	if err != nil {
		return 0, err
	}
	r := defaultRules()
	var changed, renamed, unclassified int
	for _, file := range files {
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return 0, fmt.Errorf("reading %s: %w", file, err)
		}
		res, err := r.renameSource(file, string(src))
		if err != nil {
			return 0, err
		}
		report(out, file, res, o)
		renamed += len(res.changes)
		unclassified += len(res.unclassified)
		if res.text == string(src) {
			continue
		}
		changed++
		if o.write {
			if err := os.WriteFile(filepath.Join(root, file), []byte(res.text), 0o644); err != nil {
				return 0, fmt.Errorf("writing %s: %w", file, err)
			}
		}
	}
	fmt.Fprintf(out, "tagrename: %d tags renamed in %d files, %d unclassified (written: %v)\n", renamed, changed, unclassified, o.write)
	if unclassified > 0 {
		return 1, nil
	}
	return 0, nil
}

// renameSource renames one file's tags and, for Go, formats the result
// as gofmt does (a longer tag moves aligned trailing comments).
func (r *rules) renameSource(file, src string) (result, error) {
	res := r.renameFile(file, src)
	if !strings.HasSuffix(file, ".go") || res.text == src {
		return res, nil
	}
	formatted, err := format.Source([]byte(res.text))
	if err != nil {
		return res, fmt.Errorf("formatting %s after the rename: %w", file, err)
	}
	res.text = string(formatted)
	return res, nil
}

// report lists one file's changes, unclassified tags and, with skipped,
// its non-tags.
func report(out io.Writer, file string, res result, o options) {
	if !o.quiet {
		for _, c := range res.changes {
			fmt.Fprintf(out, "%s:%d: %s -> %s (%s)\n", file, c.line, c.old, c.new, c.why)
		}
	}
	if o.skipped {
		for _, s := range res.skipped {
			fmt.Fprintf(out, "%s:%d: left %s (%s)\n", file, s.line, s.old, s.why)
		}
	}
	for _, u := range res.unclassified {
		fmt.Fprintf(out, "%s:%d: UNCLASSIFIED %s (%s): %s\n", file, u.line, u.old, u.why, strings.TrimSpace(u.text))
	}
}

// repoRoot is the top of the git work tree holding the working
// directory: the rules name files relative to it.
func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// trackedFiles lists the Go and Markdown files git tracks under root,
// relative to it, less those the rules leave alone.
func trackedFiles(root string) ([]string, error) {
	raw, err := exec.Command("git", "-C", root, "ls-files", "-z", "--", "*.go", "*.md").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files (run from the module root): %w", err)
	}
	var files []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Split(splitNUL)
	for sc.Scan() {
		if f := sc.Text(); !excluded(f) {
			files = append(files, f)
		}
	}
	return files, sc.Err()
}

// splitNUL is a bufio.SplitFunc for NUL-separated names.
func splitNUL(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
