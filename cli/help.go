package cli

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"

	ucli "github.com/urfave/cli/v2"
)

// helpColumns is the width help is wrapped to.
const helpColumns = 100

func init() {
	// Help is wrapped to helpColumns once laid out: urfave/cli's own wrap
	// runs before its columns are aligned.
	ucli.HelpPrinter = func(w io.Writer, templ string, data any) {
		var b bytes.Buffer
		ucli.HelpPrinterCustom(&b, templ, data, nil)
		io.WriteString(w, wrapHelp(b.String(), helpColumns))
	}
}

// wrapHelp wraps each line of help longer than width at spaces. A line
// continues under the column its text begins in: a flag's or a command's
// usage, after the gap of two spaces or more that follows its name; else
// under the line's own indent.
func wrapHelp(help string, width int) string {
	lines := strings.Split(help, "\n")
	var out []string
	for _, line := range lines {
		if utf8.RuneCountInString(line) <= width {
			out = append(out, line)
			continue
		}
		indent := hangingIndent(line, width)
		pad := strings.Repeat(" ", indent)
		rest := line
		first := true
		for utf8.RuneCountInString(rest) > width {
			cut := breakAt(rest, width, indent, first)
			if cut < 0 {
				break
			}
			out = append(out, strings.TrimRight(rest[:cut], " "))
			rest = pad + strings.TrimLeft(rest[cut:], " ")
			first = false
		}
		out = append(out, rest)
	}
	return strings.Join(out, "\n")
}

// hangingIndent is the column the continuation lines of line begin in.
func hangingIndent(line string, width int) int {
	lead := len(line) - len(strings.TrimLeft(line, " "))
	if i := strings.Index(line[lead:], "  "); i >= 0 {
		col := lead + i
		for col < len(line) && line[col] == ' ' {
			col++
		}
		if col < width*2/3 {
			return col
		}
	}
	return lead
}

// breakAt is the byte offset of the last space in the first width columns
// of line at which it can break (beyond indent, and on the first line beyond
// its own indent), or -1 when there is none.
func breakAt(line string, width, indent int, first bool) int {
	least := indent
	if first {
		least = len(line) - len(strings.TrimLeft(line, " "))
	}
	col, last := 0, -1
	for i, r := range line {
		if col >= width {
			break
		}
		if r == ' ' && i > least {
			last = i
		}
		col++
	}
	return last
}
