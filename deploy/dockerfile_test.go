package deploy

import (
	"bufio"
	"encoding/json"
	"go/version"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dockerInstr is one Dockerfile instruction with its continuation lines
// joined.
type dockerInstr struct {
	cmd  string // upper case: FROM, RUN, …
	args string
}

// dockerStage is the instructions from one FROM to the next.
type dockerStage struct {
	from  string // image reference
	name  string // AS name, if any
	instr []dockerInstr
}

func parseDockerfile(t *testing.T, path string) (preamble []dockerInstr, stages []*dockerStage) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if rest, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.Len() != 0 {
		t.Fatalf("%s ends inside a continued line", path)
	}
	for _, l := range lines {
		cmd, args, _ := strings.Cut(l, " ")
		in := dockerInstr{cmd: strings.ToUpper(cmd), args: strings.Join(strings.Fields(args), " ")}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			f = slices.DeleteFunc(f, func(s string) bool { return strings.HasPrefix(s, "--") })
			st := &dockerStage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			preamble = append(preamble, in)
			continue
		}
		stages[len(stages)-1].instr = append(stages[len(stages)-1].instr, in)
	}
	return preamble, stages
}

func (s *dockerStage) all(cmd string) []string {
	var out []string
	for _, in := range s.instr {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	preamble, stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a final one", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	checkBuildStage(t, root, preamble, build)
	checkFinalStage(t, build, final)
}

// checkBuildStage: the builder's Go is recent enough, modules download in
// a cached layer of their own, and relayd builds static and trimmed.
func checkBuildStage(t *testing.T, root string, preamble []dockerInstr, build *dockerStage) {
	// The builder's Go is at least what go.mod asks for.
	goVersion := ""
	for _, in := range preamble {
		if v, ok := strings.CutPrefix(in.args, "GO_VERSION="); ok && in.cmd == "ARG" {
			goVersion = v
		}
	}
	if !strings.HasPrefix(build.from, "golang:") {
		t.Errorf("build stage is FROM %s, want golang", build.from)
	}
	if goVersion == "" {
		t.Error("Dockerfile has no ARG GO_VERSION before the first FROM")
	} else if want := goModVersion(t, root); version.Compare("go"+goVersion, "go"+want) < 0 {
		t.Errorf("Dockerfile GO_VERSION %s is older than go.mod's go %s", goVersion, want)
	}

	// Modules are downloaded in their own cached layer before the sources.
	download, copyAll := -1, -1
	for i, in := range build.instr {
		switch {
		case in.cmd == "RUN" && strings.Contains(in.args, "go mod download"):
			download = i
			if !strings.Contains(in.args, "--mount=type=cache") {
				t.Error("go mod download does not use a cache mount")
			}
		case in.cmd == "COPY" && copyAll < 0 && strings.HasPrefix(in.args, ". "):
			copyAll = i
		}
	}
	if download < 0 || copyAll < 0 || download > copyAll {
		t.Error("the build stage must run go mod download before copying the sources")
	}

	buildCmd := ""
	for _, r := range build.all("RUN") {
		if strings.Contains(r, "go build") {
			buildCmd = r
		}
	}
	env := strings.Join(build.all("ENV"), " ") + " " + buildCmd
	if !regexp.MustCompile(`\bCGO_ENABLED=0\b`).MatchString(env) {
		t.Error("the build does not set CGO_ENABLED=0")
	}
	for _, want := range []string{"-trimpath", "./cmd/relayd"} {
		if !strings.Contains(buildCmd, want) {
			t.Errorf("go build line %q lacks %s", buildCmd, want)
		}
	}
}

// checkFinalStage: the final image is minimal and non-root, exposes the
// two ports, and runs the relayd the build stage built.
func checkFinalStage(t *testing.T, build, final *dockerStage) {
	// The final image: minimal, non-root, the two ports, relayd as entrypoint.
	if !strings.HasPrefix(final.from, "gcr.io/distroless/static") && final.from != "scratch" {
		t.Errorf("final stage is FROM %s, want distroless static or scratch", final.from)
	}
	users := final.all("USER")
	if len(users) == 0 {
		t.Error("the final stage sets no USER")
	} else {
		uid, _, _ := strings.Cut(users[len(users)-1], ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			t.Errorf("final USER %q must be a numeric non-root uid (runAsNonRoot can only verify a number)", users[len(users)-1])
		}
	}
	exposed := strings.Fields(strings.Join(final.all("EXPOSE"), " "))
	for _, p := range []string{"8080", "9090"} {
		if !slices.Contains(exposed, p) && !slices.Contains(exposed, p+"/tcp") {
			t.Errorf("final stage does not EXPOSE %s", p)
		}
	}
	eps := final.all("ENTRYPOINT")
	if len(eps) != 1 {
		t.Fatalf("final stage has %d ENTRYPOINTs, want 1", len(eps))
	}
	var ep []string
	if err := json.Unmarshal([]byte(eps[0]), &ep); err != nil || len(ep) == 0 {
		t.Fatalf("ENTRYPOINT %s is not the exec (JSON) form; the image has no shell", eps[0])
	}
	if filepath.Base(ep[0]) != "relayd" {
		t.Errorf("ENTRYPOINT runs %s, want relayd", ep[0])
	}
	copied := false
	for _, c := range final.all("COPY") {
		f := strings.Fields(c)
		if strings.HasPrefix(c, "--from="+build.name+" ") && f[len(f)-1] == ep[0] {
			copied = true
		}
	}
	if !copied {
		t.Errorf("the final stage does not copy relayd from the %q stage to %s", build.name, ep[0])
	}
}

func goModVersion(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

// TestDockerignore: the build context keeps what compiling relayd needs
// (go.mod, go.sum, Go sources and their embedded files) and drops the rest.
func TestDockerignore(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "!") || strings.Contains(l, "**") {
			t.Fatalf(".dockerignore pattern %q needs a fuller matcher than this test has", l)
		}
		patterns = append(patterns, strings.TrimSuffix(strings.TrimPrefix(l, "/"), "/"))
	}
	ignored := func(rel string) string {
		parts := strings.Split(rel, "/")
		for i := range parts {
			prefix := strings.Join(parts[:i+1], "/")
			for _, p := range patterns {
				if ok, _ := filepath.Match(p, prefix); ok {
					return p
				}
			}
		}
		return ""
	}
	for _, want := range []string{".git", ".env", "bin/relayd", "docs/operations.md"} {
		if ignored(want) == "" {
			t.Errorf(".dockerignore lets %s into the build context", want)
		}
	}

	needed := []string{"go.mod", "go.sum"}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".git" || rel == "deploy" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if (strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go")) || strings.HasSuffix(rel, ".lua") {
			needed = append(needed, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range needed {
		if p := ignored(rel); p != "" {
			t.Errorf(".dockerignore pattern %q drops %s, which the build needs", p, rel)
		}
	}
}
