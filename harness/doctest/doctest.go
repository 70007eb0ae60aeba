// Package doctest reads the shell examples of the project's markdown pages, so
// that tests run them as they are written.
//
// A shell example is a fenced block in sh (or bash, shell, console), or an
// unlabelled block whose first line is a command after a "$ " prompt (a
// transcript: commands and what they print). An HTML comment on the line before
// the fence (blank lines between are allowed) says how it is tested:
//
//	<!-- doctest: output -->          run each "$ " command; what it prints must be the lines after it (see Matches)
//	<!-- doctest: e2e TestName -->    run by TestName in harness/e2e, which reads the block itself
//	<!-- doctest: skip REASON -->     not run here, for the reason given
//	<!-- doctest: module [NOTE] -->   run in the page's new module (below); NOTE says how it differs from a user's run
//	<!-- doctest: file PATH -->       a block of any language: written to PATH in the page's new module
//
// An sh block without a comment is run command by command, each of which must
// succeed; a transcript needs a comment.
//
// The module and file blocks of a page are one session, as a user who starts a
// module of their own types it: in page order, in one new directory outside
// the repository, where a cd carries over to the commands after it, and with
// only the module cache to fetch modules from (ModuleEnv). A module sh block's
// commands must succeed, and a module transcript's commands must print what the
// page shows. The module is not published where the tests run, so the session
// runs each command as ModuleCommand rewrites it: go get of the module is
// preceded by a go mod edit -replace to the repository, and go mod tidy runs
// with -e.
package doctest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Modes of a block, from its comment.
const (
	// Run runs each command of an sh block; each must exit 0.
	Run = "run"
	// Output runs each "$ " command of a transcript and compares what it prints.
	Output = "output"
	// E2E blocks are run by a test of harness/e2e, named by Arg.
	E2E = "e2e"
	// Skip blocks are not run; Arg says why.
	Skip = "skip"
	// Module blocks are run in the page's new module; Arg is an optional note.
	Module = "module"
	// File blocks are written to the file Arg of the page's new module.
	File = "file"
)

// Block is a shell example.
type Block struct {
	// File is the page's path, as given to Blocks; Line is the fence's line (from 1).
	File string
	Line int
	// Lang is the fence's language ("" for a transcript without one, or for a
	// File block without one).
	Lang string
	// Mode is Run, Output, E2E, Skip, Module or File; Arg is the test (E2E),
	// the reason (Skip), the note (Module) or the file's path (File).
	Mode, Arg string
	// Marked tells whether a doctest comment preceded the block.
	Marked bool
	// Lines are the block's lines.
	Lines []string
}

// String names the block by its place.
func (b Block) String() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

var marker = regexp.MustCompile(`^<!-- doctest: (run|output|e2e|skip|module|file)(?: (.*?))? -->$`)

// shellLangs are the fence languages of shell examples.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// Blocks returns the shell examples of the markdown file at path, and the
// blocks of any language marked `doctest: file`. A doctest comment that is not
// followed by a block, or names no known mode, is an error, as is a file path
// that is absolute or leaves the module.
func Blocks(path string) ([]Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var (
		blocks  []Block
		pending *Block // the mode of a comment, until its block comes
		cur     *Block // the open fence
		inFence bool
		fence   string // the open fence's backticks (or tildes)
		indent  string // and its indentation, taken off its lines
	)
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if inFence {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`~") == "" {
				inFence = false
				if cur != nil {
					if cur.Mode == File || cur.Lang != "" || len(cur.Lines) > 0 && strings.HasPrefix(cur.Lines[0], "$ ") {
						blocks = append(blocks, *cur)
					} else if cur.Marked {
						return nil, fmt.Errorf("%s:%d: a doctest comment before a block that is no shell example", path, cur.Line)
					}
				}
				cur = nil
				continue
			}
			if cur != nil {
				cur.Lines = append(cur.Lines, strings.TrimPrefix(line, indent))
			}
			continue
		}
		if m := marker.FindStringSubmatch(trimmed); m != nil {
			if pending != nil {
				return nil, fmt.Errorf("%s:%d: a doctest comment without its block", path, pending.Line)
			}
			if (m[1] == E2E || m[1] == Skip || m[1] == File) && m[2] == "" {
				return nil, fmt.Errorf("%s:%d: doctest %s needs %s", path, n, m[1], map[string]string{E2E: "a test name", Skip: "a reason", File: "a file path"}[m[1]])
			}
			if m[1] == File {
				if !filepath.IsLocal(m[2]) || filepath.Clean(m[2]) != m[2] {
					return nil, fmt.Errorf("%s:%d: doctest file %s: give a clean path inside the module, such as cmd/tool/main.go", path, n, m[2])
				}
			}
			pending = &Block{File: path, Line: n, Mode: m[1], Arg: m[2], Marked: true}
			continue
		}
		if strings.HasPrefix(trimmed, "<!-- doctest") {
			return nil, fmt.Errorf("%s:%d: unknown doctest comment %s: use output, e2e TEST, skip REASON, module, file PATH or run", path, n, trimmed)
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			for strings.HasPrefix(trimmed[len(fence):], fence[:1]) {
				fence += fence[:1]
			}
			inFence = true
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
			lang := strings.TrimSpace(strings.TrimLeft(trimmed, "`~"))
			if pending != nil && pending.Mode == File {
				b := *pending
				b.Line, b.Lang = n, lang
				pending, cur = nil, &b
				continue
			}
			if lang != "" && !shellLangs[lang] {
				if pending != nil {
					return nil, fmt.Errorf("%s:%d: a doctest comment before a %s block", path, pending.Line, lang)
				}
				continue
			}
			b := Block{File: path, Line: n, Lang: lang, Mode: Run}
			if pending != nil {
				b.Mode, b.Arg, b.Marked = pending.Mode, pending.Arg, true
				pending = nil
			}
			cur = &b
			continue
		}
		if pending != nil && trimmed != "" {
			return nil, fmt.Errorf("%s:%d: a doctest comment without its block", path, pending.Line)
		}
	}
	if pending != nil {
		return nil, fmt.Errorf("%s:%d: a doctest comment without its block", path, pending.Line)
	}
	return blocks, sc.Err()
}

// Commands returns the commands of an sh block: its lines, with lines that end
// in a backslash joined to the next, leaving out blank lines and comments.
func (b Block) Commands() []string {
	var cmds []string
	var cur string
	for _, l := range b.Lines {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\")
			continue
		}
		cur += l
		if s := strings.TrimSpace(cur); s != "" && !strings.HasPrefix(s, "#") {
			cmds = append(cmds, s)
		}
		cur = ""
	}
	return cmds
}

// Step is a command of a transcript and the lines it prints.
type Step struct {
	Command string
	Output  []string
}

// Transcript returns the commands of a transcript (lines after "$ ") and the
// lines after each, up to the next command.
func (b Block) Transcript() []Step {
	var steps []Step
	for _, l := range b.Lines {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			steps = append(steps, Step{Command: c})
			continue
		}
		if len(steps) > 0 {
			steps[len(steps)-1].Output = append(steps[len(steps)-1].Output, l)
		}
	}
	return steps
}

// Pages returns README.md and every markdown file under docs/ of the module at
// root, as paths relative to root.
func Pages(root string) ([]string, error) {
	pages := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			pages = append(pages, filepath.ToSlash(rel))
		}
		return nil
	})
	return pages, err
}

// Find returns the block of the pages under root marked `doctest: e2e test`;
// it is an error unless there is exactly one.
func Find(root, test string) (Block, error) {
	pages, err := Pages(root)
	if err != nil {
		return Block{}, err
	}
	var found []Block
	for _, p := range pages {
		blocks, err := Blocks(filepath.Join(root, p))
		if err != nil {
			return Block{}, err
		}
		for _, b := range blocks {
			if b.Mode == E2E && b.Arg == test {
				b.File = p
				found = append(found, b)
			}
		}
	}
	if len(found) != 1 {
		return Block{}, fmt.Errorf("%d blocks of the docs are marked <!-- doctest: e2e %s -->; want one", len(found), test)
	}
	return found[0], nil
}

// Link is a markdown link of a page.
type Link struct {
	Target string
	Line   int
}

var (
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
)

// Links returns the targets of the inline links of a markdown page, outside
// code blocks and code spans.
func Links(text string) []Link {
	var links []Link
	for i, line := range prose(text) {
		line = codeSpanRE.ReplaceAllString(line, "``")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			links = append(links, Link{Target: m[1], Line: i + 1})
		}
	}
	return links
}

// prose returns the lines of a markdown page with those of fenced code blocks
// (and their fences) left empty, so that a line's index is its place.
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
			lines[i] = ""
		}
	}
	return lines
}

// Anchors returns the anchors GitHub gives the headings of a markdown page: the
// heading's text without its markup, lower-cased, with spaces as hyphens and
// every character but letters, digits, hyphens and underscores left out; a
// repeated anchor gets -1, -2, … after it.
func Anchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(text) {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := Anchor(m[1])
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

var (
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	mdLinkRE  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// Anchor returns GitHub's anchor of one heading's text.
func Anchor(heading string) string {
	heading = mdLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Matches tells whether out, what a transcript's command printed, is what the
// page shows (want, its lines). The page may elide: a line that is only "…"
// stands for any number of lines, and "…" within a line for any text; a time of
// day (13:40:26.555), a run ID (20261202-134026-b17ca4) and a duration after
// "in " (14ms, 3.3s) stand for any other.
func Matches(want []string, out string) bool {
	var re strings.Builder
	re.WriteString(`\A`)
	for _, l := range want {
		if strings.TrimSpace(l) == "…" {
			re.WriteString(`(?:[^\n]*\n)*?`)
			continue
		}
		re.WriteString(linePattern(l))
		re.WriteString(`\n`)
	}
	re.WriteString(`\z`)
	out = strings.TrimRight(out, "\n") + "\n"
	return regexp.MustCompile(re.String()).MatchString(out)
}

var variable = regexp.MustCompile(`…|\b\d\d:\d\d:\d\d\.\d{3}\b|\b\d{8}-\d{6}-[0-9a-f]{6}\b|\bin \d+(?:\.\d+)?(?:µs|ms|s|m)\b`)

// linePattern is the regular expression of one line of a transcript.
func linePattern(line string) string {
	var b strings.Builder
	last := 0
	for _, m := range variable.FindAllStringIndex(line, -1) {
		b.WriteString(regexp.QuoteMeta(line[last:m[0]]))
		switch v := line[m[0]:m[1]]; {
		case v == "…":
			b.WriteString(`[^\n]*`)
		case strings.HasPrefix(v, "in "):
			b.WriteString(`in [0-9.]+(?:µs|ms|s|m)`)
		case strings.Contains(v, ":"):
			b.WriteString(`\d\d:\d\d:\d\d\.\d{3}`)
		default:
			b.WriteString(`\d{8}-\d{6}-[0-9a-f]{6}`)
		}
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(line[last:]))
	return b.String()
}
