package yamlload

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Tricky holds strings that break naive YAML writers: YAML's keywords and
// numbers, indicators at the start and inside, document markers, comments,
// every kind of line break and space at the ends, quotes, control and
// non-ASCII characters, bytes that are not UTF-8, templating, and long text
// that a writer folds.
var Tricky = []string{
	"", " ", "a", "yes", "no", "on", "off", "y", "N", "~", "null", "true", "FALSE", "0755", "1e3", "1_000", "0x1F", "0b101", "-0b11",
	"+1", "-", "- ", "- a", "-a", ": ", "a: b", "a:b", ":a", "?", "? a", "#", "a #b", "a#b", "*a", "&a", "!a", "|", ">", "'", "\"", "%", "@", "`",
	"{", "}", "[a]", "a,b", "---", "...", "--- a", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10", "1:20", "190:20:30.15",
	".5", ".inf", "-.Inf", ".NaN", "+.5", "3.", "1.2.3", "<<", "a\nb", "a\n", "a\n\n", "\n", "\na", " a", "a ", "a \nb", "a\n b", "\ta", "a\tb",
	"a\rb", "a\u0085b", "a\u2028b", "\u00a0", "é", "日本語", "😀", "a😀b", "\ufeffbom", "a\ufeff", "\x00", "\x07", "\x1b[0m", "\x7f", "\xff", "a\xffb",
	"{{workflow.parameters.p}}", "{% raw %}", "$(echo hi)", `C:\path`, `say "hi"`, "it's",
	strings.Repeat("word ", 40), strings.Repeat("x", 100) + " " + strings.Repeat("y", 100), strings.Repeat("a  b ", 30), "'" + strings.Repeat("q ", 60) + "'",
	"{" + strings.Repeat(`"k": "v v", `, 20) + "}", strings.Repeat("line of text\n", 5), strings.Repeat("é ", 60), strings.Repeat("\x01 ", 50),
	strings.Repeat("k", 128), strings.Repeat("k", 129),
}

// Special holds, for each type that some YAML loader resolves a plain scalar
// to, instances of every form it reads as that type, and near misses: the
// implicit types of the YAML 1.1 type repository (yaml.org/type: bool, float,
// int, merge, null, timestamp, value, yaml), by its regular expressions, by
// PyYAML's resolver (lib/yaml/resolver.py), which differs from them in places,
// by Ruby's Psych (lib/psych/scalar_scanner.rb: symbols, numbers with commas),
// and by yaml.v2's and yaml.v3's resolve.go (0o octals, 1_000, 1e3, 0b1, and
// the old booleans yaml.v3 quotes). Written plain, each of them is read as
// something other than the string by at least one of those, or refused.
var Special = []string{
	// bool: the repository's words, in the cases it lists and in others.
	"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
	"on", "On", "ON", "off", "Off", "OFF", "yEs", "nO", "oN", "oFF", "tRuE", "fALSE",
	// null
	"", "~", "null", "Null", "NULL", "nULL",
	// int: binary, octal (1.1's 0777 and 1.2's 0o777), decimal, hexadecimal,
	// sexagesimal, with signs and underscores; PyYAML reads 0b_ and 0x_ as ints
	// it cannot construct.
	"0", "-0", "+0", "12", "+12", "-12", "1_000", "1__0", "12_", "0b1010", "-0b1010", "+0b1_0", "0b_", "0B1", "017", "-017",
	"0_17", "0o17", "-0o17", "0O17", "08", "09", "0x1F", "-0x1F", "+0x_1f", "0x_", "0X1F", "1:20", "-1:20:30", "190:20:30",
	"1:60", "0:10",
	// float: fixed and exponent forms (PyYAML's exponent needs its sign),
	// sexagesimal, infinities, not-a-number, and the repository's own
	// expression, whose fraction may hold dots.
	"1.5", "1.", "-1.", "+1.", ".5", "+.5", "-.5", "1_0.5", "1.5_", "1.0e+5", "1.0e5", "1e5", "1E-5", "6.8523015e+5",
	"685.230_15e+03", "190:20:30.15", "1:20.5", ".inf", "-.inf", "+.INF", ".Inf", ".NaN", ".nan", ".NAN", "-.nan", ".",
	"-.", "1.2.3", "1..2", ".1.2", "0.", "00.5", "1.e+5", ".5e+5", "1.2.3e+4",
	// timestamp: dates, date-times with T, t, spaces or tabs, fractions and
	// zones; a date PyYAML matches but cannot construct.
	"2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14T21:59:43Z", "2001-12-14 21:59:43.10 -5",
	"2001-12-15 2:59:43.10", "2001-12-14  21:59:43.10", "2001-12-14\t21:59:43.10", "2002-1-2", "2001-13-45",
	"9999-99-99", "2001-12-14 21:59:43.10 Z", "2001-12-14T21:59:43+5", "2001-02-30", "2001-12-14T21:59:43.",
	"2001-12-14 21:59:43 +05:30",
	// merge, value, yaml
	"<<", "=", "!", "&", "*", "<", "<<<", "==", "!!", "&a", "*a",
	// Psych's symbols, numbers with commas, timestamps with a year's sign or a
	// zone without its colon
	":", "::", ":a", ":8080", ":'a'", "1,000", "-1,000", "1,0.5", "0,7", "0b1,0", "0x,1F", "1,", ",1",
	"-2001-12-14 21:59:43", "2001-12-14 21:59:43 +0530", "2001-12-14 21:59:43+05:",
}

// Controls holds every C0 control character and DEL, alone and inside text, and
// the characters outside ASCII that YAML treats apart: NEL, the line and
// paragraph separators, the byte order mark, no-break space, the
// non-characters U+FFFE and U+FFFF, and a character past the basic plane.
func Controls() []string {
	var out []string
	for c := rune(0); c < 0x20; c++ {
		out = append(out, controlForms(string(c))...)
	}
	out = append(out, controlForms("\x7f")...)
	for _, s := range []string{"\u0085", "\u2028", "\u2029", "\ufeff", "\u00a0", "\ufffe", "\uffff", "\U0010fffd", "\U0001f600"} {
		out = append(out, controlForms(s)...)
	}
	return out
}

func controlForms(c string) []string {
	return []string{c, "a" + c + "b", c + "a", "a" + c, c + c, "yes" + c, c + "1"}
}

// Corpus returns the strings of the fuzz corpora under root (every file of
// every testdata/fuzz/<Target> directory, in the format of go test), each
// argument of type string or []byte.
func Corpus(t testing.TB, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "*", "testdata", "fuzz", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join(root, "testdata", "fuzz", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, path := range append(files, more...) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<24)
		for first := true; sc.Scan(); first = false {
			line := strings.TrimSpace(sc.Text())
			if first {
				if line != "go test fuzz v1" {
					t.Fatalf("%s: not a fuzz corpus file", path)
				}
				continue
			}
			for _, prefix := range []string{"string(", "[]byte("} {
				if lit, ok := strings.CutPrefix(line, prefix); ok {
					s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
					if err != nil {
						t.Fatalf("%s: %q: %v", path, line, err)
					}
					out = append(out, s)
				}
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
