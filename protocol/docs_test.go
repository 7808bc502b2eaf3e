package protocol

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The repository's notes in docs/ are cited from code comments by section
// number (docs/wire-protocol.md, then a section sign and a number) and
// linked from Markdown by anchor. TestDocReferences fails when a citation
// or a link points at a file, section or anchor that does not exist, so
// renumbering a section means updating its citations in the same change.

const sect = "\u00a7" // the section sign, spelled out so this file cites nothing

var (
	// A citation: a docs page, then any run of section numbers joined by
	// commas, "and" or dashes ("docs/x.md S4.2, S4.4 and S5-S6", S being
	// the section sign).
	citeRE = regexp.MustCompile(`docs/([\w-]+\.md)((?:(?:\s|,|and|-|–)*` + sect + `[0-9]+(?:\.[0-9]+)*)*)`)
	// Inside docs/*.md: section numbers, optionally after a page name.
	mdCiteRE  = regexp.MustCompile(`(?:([\w-]+\.md)\s*)?(` + sect + `[0-9]+(?:\.[0-9]+)*(?:(?:\s|,|and|-|–)*` + sect + `[0-9]+(?:\.[0-9]+)*)*)`)
	numRE     = regexp.MustCompile(sect + `([0-9]+(?:\.[0-9]+)*)`)
	anchorRE  = regexp.MustCompile(`docs/([\w-]+\.md)#([\w-]+)`)
	mdLinkRE  = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	secNumRE  = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)*)\.?\s`)
	commentRE = regexp.MustCompile(`\n[ \t]*//[ \t]?`)
)

// mdDoc is what a Markdown file offers to links and citations.
type mdDoc struct {
	anchors  map[string]bool
	sections map[string]bool
}

// slug is GitHub's heading anchor: lower case, punctuation dropped,
// spaces to hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// proseLines returns the lines of a Markdown file outside code fences.
func proseLines(text string) []string {
	var out []string
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if !fence {
			out = append(out, line)
		}
	}
	return out
}

func parseMD(text string) mdDoc {
	d := mdDoc{anchors: map[string]bool{}, sections: map[string]bool{}}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		title := m[1]
		a := slug(title)
		if n := seen[a]; n > 0 {
			d.anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			d.anchors[a] = true
		}
		seen[a]++
		if n := secNumRE.FindStringSubmatch(title); n != nil {
			d.sections[n[1]] = true
		}
	}
	return d
}

// docRefs checks every citation and link in the tree below root and returns
// one line per broken one.
func docRefs(root string) ([]string, error) {
	var problems []string
	docs := map[string]mdDoc{} // by path relative to root, slash-separated
	load := func(rel string) (mdDoc, bool) {
		if d, ok := docs[rel]; ok {
			return d, true
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return mdDoc{}, false
		}
		d := parseMD(string(b))
		docs[rel] = d
		return d, true
	}
	checkSections := func(where, page, run string) {
		d, ok := load(page)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: %s does not exist", where, page))
			return
		}
		for _, n := range numRE.FindAllStringSubmatch(run, -1) {
			if !d.sections[n[1]] {
				problems = append(problems, fmt.Sprintf("%s: %s has no section %s", where, page, n[1]))
			}
		}
	}
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "target" || name == "node_modules" || name == "bin" || name == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "protocol/docs_test.go" {
			return nil // its fixtures are broken on purpose
		}
		switch {
		case strings.HasSuffix(name, ".go"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			// Join comment lines so that a citation may wrap.
			text := commentRE.ReplaceAllString(string(b), " ")
			covered := make([]bool, len(text))
			for _, m := range citeRE.FindAllStringSubmatchIndex(text, -1) {
				checkSections(rel, "docs/"+text[m[2]:m[3]], text[m[4]:m[5]])
				for i := m[0]; i < m[1]; i++ {
					covered[i] = true
				}
			}
			for _, m := range anchorRE.FindAllStringSubmatch(text, -1) {
				if d, ok := load("docs/" + m[1]); !ok || !d.anchors[m[2]] {
					problems = append(problems, fmt.Sprintf("%s: no anchor %s in docs/%s", rel, m[2], m[1]))
				}
			}
			for _, i := range numRE.FindAllStringIndex(text, -1) {
				if !covered[i[0]] {
					problems = append(problems, fmt.Sprintf("%s: a section number without the docs page it is in: %q", rel, text[max(0, i[0]-30):i[1]]))
				}
			}
		case strings.HasSuffix(name, ".md"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			dir := filepath.ToSlash(filepath.Dir(rel))
			for _, line := range proseLines(string(b)) {
				for _, m := range mdLinkRE.FindAllStringSubmatch(line, -1) {
					target := m[1]
					if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
						continue
					}
					file, anchor, _ := strings.Cut(target, "#")
					if file == "" {
						file = rel
					} else {
						file = filepath.ToSlash(filepath.Clean(filepath.Join(dir, file)))
					}
					if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil {
						problems = append(problems, fmt.Sprintf("%s: link to missing %s", rel, file))
						continue
					}
					if anchor != "" && strings.HasSuffix(file, ".md") {
						if d, _ := load(file); !d.anchors[anchor] {
							problems = append(problems, fmt.Sprintf("%s: link to missing anchor %s#%s", rel, file, anchor))
						}
					}
				}
				if !strings.HasPrefix(rel, "docs/") {
					continue
				}
				// In docs, a bare section number is one of the same page.
				for _, m := range mdCiteRE.FindAllStringSubmatch(line, -1) {
					page := rel
					if m[1] != "" {
						page = "docs/" + m[1]
					}
					checkSections(rel, page, m[2])
				}
			}
		}
		return nil
	})
	return problems, err
}

func TestDocReferences(t *testing.T) {
	problems, err := docRefs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestDocReferencesCatch checks that the checker sees what it must.
func TestDocReferencesCatch(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A\n\n## 1. One\n\n### 1.2 Two words\n\nSee "+sect+"1.2 and "+sect+"3.\n\n[x](#12-two-words) [y](#nope) [z](b.md)\n")
	write("x/x.go", "package x\n\n// As docs/a.md "+sect+"1.2 and\n// "+sect+"1.3 say, see docs/a.md#1-one and docs/a.md#gone;\n// also "+sect+"9 alone and docs/c.md.\n")
	problems, err := docRefs(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"docs/a.md: docs/a.md has no section 3",
		"docs/a.md: link to missing anchor docs/a.md#nope",
		"docs/a.md: link to missing docs/b.md",
		"x/x.go: docs/a.md has no section 1.3",
		"x/x.go: no anchor gone in docs/a.md",
		"x/x.go: a section number without the docs page it is in",
		"x/x.go: docs/c.md does not exist",
	}
	got := strings.Join(problems, "\n")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("missing problem %q; got:\n%s", w, got)
		}
	}
	if len(problems) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(problems), len(want), got)
	}
}
