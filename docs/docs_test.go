// Package docs holds the tests that keep the repository explaining itself:
// every requirement ID the code cites is defined in docs/requirements.md, and
// nothing cites what a reader of the repository cannot open (an issue
// number, a file outside the repository). It has no code of its own.
//
// The tests guard the documentation itself, so they are not named after a
// requirement ID.
package docs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// maxFileBytes is the size above which a file is not read for citations:
// such files are captured data or lockfiles, not prose.
const maxFileBytes = 2 << 20

// repoFiles returns the repository's root (the parent of this package's
// directory) and the files git knows there: tracked ones and new ones not
// yet added (but not ignored), as slash-separated paths relative to the
// root, sorted, none under a node_modules directory and none missing from
// the working tree. The test is skipped when git is not installed or the
// root is not a git checkout.
func repoFiles(t *testing.T) (root string, files []string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed:", err)
	}
	if out, err := exec.Command(git, "-C", root, "rev-parse", "--is-inside-work-tree").Output(); err != nil || strings.TrimSpace(string(out)) != "true" {
		t.Skipf("%s is not a git checkout (%v)", root, err)
	}
	cmd := exec.Command(git, "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v\n%s", err, stderr.Bytes())
	}
	seen := map[string]bool{}
	for name := range strings.SplitSeq(string(out), "\x00") {
		if name == "" || seen[name] || slices.Contains(strings.Split(name, "/"), "node_modules") {
			continue
		}
		seen[name] = true
		// A tracked file deleted in the working tree (a move not yet
		// committed) is not there to read.
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(name))); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		files = append(files, name)
	}
	slices.Sort(files)
	return root, files
}

// prefixes are the requirement ID prefixes docs/requirements.md defines.
const prefixes = `ENG|UES|ADP|PERM|BND|RUN|LED|PRO|CTL|ACP|MCP|DIST|SEC|PERF|FAIL|API|WS|CON|ACC|OBS`

var (
	// testNameID is a requirement ID as a test, fuzz test or benchmark
	// names it: TestENG004_…, FuzzPERF2_…, TestLED1Something.
	testNameID = regexp.MustCompile(`(?m)^func (?:Test|Fuzz|Benchmark)([A-Z]+)(\d+)[_A-Z]`)
	// citedID is a requirement ID as prose and comments cite it: RUN-4.
	citedID = regexp.MustCompile(`\b(` + prefixes + `)-(\d+)\b`)
	// definedID is a requirement ID that starts a line of
	// docs/requirements.md (a paragraph or a list item): its definition.
	definedID = regexp.MustCompile(`(?m)^(?:[-*] +)?(?:\*\*)?([A-Z]+)-(\d+)\b`)
)

// canonicalID writes a requirement ID the way docs/requirements.md does:
// ENG with three digits (ENG-004), every other prefix without padding
// (LED-1), whatever zeros the citation had.
func canonicalID(prefix, digits string) string {
	n, err := strconv.Atoi(digits)
	if err != nil { // more digits than an int holds: no requirement has that
		return prefix + "-" + digits
	}
	if prefix == "ENG" {
		return fmt.Sprintf("%s-%03d", prefix, n)
	}
	return fmt.Sprintf("%s-%d", prefix, n)
}

// lineOf is the 1-based line of data that holds byte offset off.
func lineOf(data []byte, off int) int { return bytes.Count(data[:off], []byte("\n")) + 1 }

// TestRequirementIDsAreDefined: every requirement ID a test is named after
// (in a _test.go file) or that a comment or page cites (in a .go or .md
// file) is defined in docs/requirements.md, once.
func TestRequirementIDsAreDefined(t *testing.T) {
	root, files := repoFiles(t)
	reqs, err := os.ReadFile(filepath.Join(root, "docs", "requirements.md"))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]int{} // ID → line of its definition
	for _, m := range definedID.FindAllSubmatchIndex(reqs, -1) {
		id := canonicalID(string(reqs[m[2]:m[3]]), string(reqs[m[4]:m[5]]))
		line := lineOf(reqs, m[0])
		if first, dup := defined[id]; dup {
			t.Errorf("docs/requirements.md:%d defines %s again (first at line %d)", line, id, first)
			continue
		}
		defined[id] = line
	}
	if len(defined) == 0 {
		t.Fatal("docs/requirements.md defines no requirement ID")
	}

	cited := map[string][]string{} // undefined ID → file:line citing it
	cite := func(name string, data []byte, re *regexp.Regexp) {
		for _, m := range re.FindAllSubmatchIndex(data, -1) {
			id := canonicalID(string(data[m[2]:m[3]]), string(data[m[4]:m[5]]))
			if _, ok := defined[id]; !ok {
				cited[id] = append(cited[id], fmt.Sprintf("%s:%d", name, lineOf(data, m[0])))
			}
		}
	}
	for _, name := range files {
		isGo, isMD := strings.HasSuffix(name, ".go"), strings.HasSuffix(name, ".md")
		if !isGo && !isMD {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, "_test.go") {
			cite(name, data, testNameID)
		}
		cite(name, data, citedID)
	}
	for _, id := range slices.Sorted(maps.Keys(cited)) {
		t.Errorf("%s is cited but not defined in docs/requirements.md: %s", id, strings.Join(cited[id], ", "))
	}
}

// outsideCitations are what a reader of the repository could not follow:
// an issue number, the design file the requirements were first drafted in,
// and the workspace folder beside the checkout where that file and the
// vendors' notes lived. The patterns are
// built from pieces so that this file does not cite what it forbids.
var outsideCitations = []struct {
	what string
	re   *regexp.Regexp
}{
	{"an issue number", regexp.MustCompile(`(?i)\bissues?` + ` #?\d+\b`)},
	{"the design file outside the repository", regexp.MustCompile(regexp.QuoteMeta("DESIGN" + ".md"))},
	// A path is reported whole, up to a space, quote, bracket or escape.
	{"a path outside the repository", regexp.MustCompile(`(?:` + regexp.QuoteMeta("../"+"shared") + `|` +
		regexp.QuoteMeta("/"+"work/"+"shared") + `)[^\s"'` + "`" + `()<>\[\]{},;\\]*`)},
}

// TestNoCitationsOutsideTheRepository: no text file of the repository (up
// to maxFileBytes) cites an issue number, the design file or a path outside
// the repository. The repository explains itself: requirements are cited
// by their ID in docs/requirements.md, history is in git.
func TestNoCitationsOutsideTheRepository(t *testing.T) {
	root, files := repoFiles(t)
	var found []string // file:line: what: "text", by file, then line
	for _, name := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		info, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Mode().IsRegular() || info.Size() > maxFileBytes {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
			continue // binary, as git decides it
		}
		// One report per line and kind, its first citation and how many
		// more the line holds (a captured stack trace repeats a path).
		type hit struct {
			line  int
			what  string
			first string
			more  int
		}
		var hits []*hit
		for _, c := range outsideCitations {
			for _, m := range c.re.FindAllIndex(data, -1) {
				line := lineOf(data, m[0])
				if n := len(hits); n > 0 && hits[n-1].line == line && hits[n-1].what == c.what {
					hits[n-1].more++
					continue
				}
				hits = append(hits, &hit{line: line, what: c.what, first: string(data[m[0]:m[1]])})
			}
		}
		slices.SortStableFunc(hits, func(a, b *hit) int { return a.line - b.line })
		for _, h := range hits {
			s := fmt.Sprintf("%s:%d: %s: %q", name, h.line, h.what, h.first)
			if h.more > 0 {
				s += fmt.Sprintf(" (and %d more on the line)", h.more)
			}
			found = append(found, s)
		}
	}
	if len(found) > 0 {
		t.Errorf("%d citation(s) a reader of the repository cannot follow:\n%s", len(found), strings.Join(found, "\n"))
	}
}
