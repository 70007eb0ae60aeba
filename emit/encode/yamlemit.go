package encode

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// emitter writes YAML block style exactly as go.yaml.in/yaml/v2's emitter does
// (emitterc.go, a port of libyaml): two-space indents, sequences in a mapping not
// indented, empty collections in flow style, and each scalar in the style that
// emitter picks, with its line folding at 80 columns. The state and its updates
// follow that emitter's fields and functions of the same names, so that the
// bytes match; yamlv2_test.go compares the two on many values.
type emitter struct {
	buf []byte
	// flushed counts the bytes of the document already written out of buf
	// (by a Seq), which a mark's position counts too.
	flushed    int
	column     int
	indent     int
	indents    []int
	flowLevel  int
	whitespace bool
	indention  bool
	// folds counts the long strings' lines folded at bestWidth.
	folds int
	// analyzed holds the analysis of strings analyze took the long way over,
	// which the objects of a stream repeat from one to the next (commands,
	// templates, a flow's shared values).
	analyzed map[string]scalarAnalysis
}

// The analyses an emitter keeps: of strings of at most analyzedLen bytes, at
// most analyzedMax of them, forgotten all at once when there are more.
const (
	analyzedLen = 1 << 10
	analyzedMax = 1 << 10
)

// analyze is analyzeScalar(s): simpleAnalysis for a simple value that does not
// end in a space, else kept for a string met again.
func (e *emitter) analyze(s string) scalarAnalysis {
	if ok, _ := simple(s); ok && s[len(s)-1] != ' ' {
		return simpleAnalysis
	}
	if len(s) > analyzedLen {
		return analyzeScalar(s)
	}
	if a, ok := e.analyzed[s]; ok {
		return a
	}
	if e.analyzed == nil || len(e.analyzed) >= analyzedMax {
		e.analyzed = make(map[string]scalarAnalysis)
	}
	a := analyzeScalar(s)
	e.analyzed[strings.Clone(s)] = a
	return a
}

const (
	bestIndent = 2
	bestWidth  = 80
	// maxSimpleKey is the longest key written as "key: value"; a longer one is
	// written as "? key" then ": value".
	maxSimpleKey = 128
)

// mark is a point in the output that the emitter can return to.
type mark struct {
	n, column, indent, indents, flowLevel int
	whitespace, indention                 bool
}

func (e *emitter) mark() mark {
	return mark{e.flushed + len(e.buf), e.column, e.indent, len(e.indents), e.flowLevel, e.whitespace, e.indention}
}

func (e *emitter) reset(m mark) {
	if m.n < e.flushed {
		// Only a value that writes nothing, or an empty mapping, is taken
		// back, and neither holds a Seq whose items were written out.
		panic("encode: taking back output already written")
	}
	e.buf = e.buf[:m.n-e.flushed]
	e.column, e.indent, e.indents, e.flowLevel = m.column, m.indent, e.indents[:m.indents], m.flowLevel
	e.whitespace, e.indention = m.whitespace, m.indention
}

// startDocument readies the emitter for a document, as a new yaml.v2 encoder is.
func (e *emitter) startDocument() {
	e.column, e.indent, e.indents, e.flowLevel = 0, -1, e.indents[:0], 0
	e.whitespace, e.indention = true, true
}

// endDocument ends the document and its stream. (yaml.v2's encoder clears the
// emitter's open_ended before the stream's end, so no "..." follows.)
func (e *emitter) endDocument() {
	e.writeIndent()
}

func (e *emitter) increaseIndent(flow, indentless bool) {
	e.indents = append(e.indents, e.indent)
	if e.indent < 0 {
		if flow {
			e.indent = bestIndent
		} else {
			e.indent = 0
		}
	} else if !indentless {
		e.indent += bestIndent
	}
}

func (e *emitter) popIndent() {
	e.indent = e.indents[len(e.indents)-1]
	e.indents = e.indents[:len(e.indents)-1]
}

func (e *emitter) put(b byte) {
	e.buf = append(e.buf, b)
	e.column++
}

func (e *emitter) putBreak() {
	e.buf = append(e.buf, '\n')
	e.column = 0
}

// write copies the character at s[i] and returns the index after it.
func (e *emitter) write(s string, i int) int {
	w := width(s[i])
	e.buf = append(e.buf, s[i:i+w]...)
	e.column++
	return i + w
}

func (e *emitter) writeBreak(s string, i int) int {
	if s[i] == '\n' {
		e.putBreak()
		return i + 1
	}
	i = e.write(s, i)
	e.column = 0
	return i
}

func (e *emitter) writeIndent() {
	indent := max(e.indent, 0)
	if !e.indention || e.column > indent || (e.column == indent && !e.whitespace) {
		e.putBreak()
	}
	for e.column < indent {
		e.put(' ')
	}
	e.whitespace, e.indention = true, true
}

func (e *emitter) writeIndicator(indicator string, needWhitespace, isWhitespace, isIndention bool) {
	if needWhitespace && !e.whitespace {
		e.put(' ')
	}
	for i := 0; i < len(indicator); {
		i = e.write(indicator, i)
	}
	e.whitespace = isWhitespace
	e.indention = e.indention && isIndention
}

// Contexts of a node, as the emitter's emit_node records them.
const (
	ctxRoot = 1 << iota
	ctxSequence
	ctxMapping
	ctxSimpleKey
)

// The scalar styles.
const (
	stylePlain = iota
	styleSingle
	styleDouble
	styleLiteral
)

// scalarAnalysis is what analyze_scalar finds in a value.
type scalarAnalysis struct {
	multiline, flowPlain, blockPlain, singleQuoted, block bool
}

// plain writes a scalar yaml.v2 writes as it stands when the analysis allows: a
// number or a boolean.
func (e *emitter) plain(s string, ctx int) {
	e.scalar(s, stylePlain, ctx)
}

// str writes a string as yaml.v2's encoder does: literal when it has a line
// break, plain unless some loader would read it back as another type
// (readsAsString), else double-quoted; then the emitter chooses what the value
// allows.
func (e *emitter) str(s string, ctx int) {
	if bare(s) && readsAsString(s) {
		// What scalar and writePlain do for such a value in any context.
		if !e.whitespace {
			e.put(' ')
		}
		e.buf = append(e.buf, s...)
		e.column += len(s)
		e.whitespace, e.indention = false, false
		return
	}
	style := styleDouble
	switch {
	case strings.IndexByte(s, '\n') >= 0:
		style = styleLiteral
	case readsAsString(s):
		style = stylePlain
	}
	e.scalar(s, style, ctx)
}

// scalar writes s in the style asked, or the one the emitter falls back to
// (select_scalar_style), with the node's context.
func (e *emitter) scalar(s string, style, ctx int) {
	a := e.analyze(s)
	simpleKey := ctx&ctxSimpleKey != 0
	if simpleKey && a.multiline {
		style = styleDouble
	}
	if style == stylePlain {
		if e.flowLevel > 0 && !a.flowPlain || e.flowLevel == 0 && !a.blockPlain {
			style = styleSingle
		}
		if len(s) == 0 && (e.flowLevel > 0 || simpleKey) {
			style = styleSingle
		}
	}
	if style == styleSingle && !a.singleQuoted {
		style = styleDouble
	}
	if style == styleLiteral && (!a.block || e.flowLevel > 0 || simpleKey) {
		style = styleDouble
	}
	e.increaseIndent(true, false)
	switch style {
	case stylePlain:
		e.writePlain(s, !simpleKey)
	case styleSingle:
		e.writeSingleQuoted(s, !simpleKey)
	case styleDouble:
		e.writeDoubleQuoted(s, !simpleKey)
	case styleLiteral:
		e.writeLiteral(s)
	}
	e.popIndent()
}

// simpleKey reports whether a mapping key can be written as "key:".
func (e *emitter) simpleKey(s string) bool {
	return len(s) <= maxSimpleKey && !e.analyze(s).multiline
}

// plainSafe marks the bytes that, after a value's first byte, leave its analysis
// as it is: printable ASCII but for flow indicators, ':' and '#'. A value whose
// first byte is a letter or digit and whose others are plainSafe, not ending in a
// space, may be written in any style (most names, images and quantities are).
var plainSafe = func() (t [256]bool) {
	for b := 0x20; b < 0x7F; b++ {
		t[b] = !strings.ContainsRune(",?[]{}:#", rune(b))
	}
	return t
}()

// inert marks the bytes that, after a value's first byte, change nothing in its
// analysis but to say that the byte before the next is neither a space nor a
// break: the plainSafe bytes but the space.
var inert = func() (t [256]bool) {
	t = plainSafe
	t[' '] = false
	return t
}()

// simple reports whether s is a letter or digit followed by plainSafe bytes, and
// whether it holds a space.
func simple(s string) (ok, spaced bool) {
	if len(s) == 0 || !isAlnum(s[0]) {
		return false, false
	}
	for i := 1; i < len(s); i++ {
		if !plainSafe[s[i]] {
			return false, false
		}
		spaced = spaced || s[i] == ' '
	}
	return true, spaced
}

// bare reports whether s is simple without spaces: analyze allows it every
// style, and writePlain copies it as it is.
func bare(s string) bool {
	ok, spaced := simple(s)
	return ok && !spaced
}

// simpleAnalysis is the analysis of a simple value that does not end in a space:
// every style is allowed.
var simpleAnalysis = scalarAnalysis{flowPlain: true, blockPlain: true, singleQuoted: true, block: true}

// analyzeScalar is analyze_scalar: what styles value may be written in. The
// emitter's analyze gives simple values' analysis without it.
func analyzeScalar(value string) scalarAnalysis {
	if len(value) == 0 {
		return scalarAnalysis{blockPlain: true, singleQuoted: true}
	}
	var (
		t                                          scalarTraits
		previousSpace, previousBreak, precededByWS bool
	)
	if strings.HasPrefix(value, "---") || strings.HasPrefix(value, "...") {
		t.blockIndicators, t.flowIndicators = true, true
	}
	precededByWS = true
	for i, w := 0, 0; i < len(value); i += w {
		if i > 0 && inert[value[i]] {
			// A run of such bytes sets no indicator, and leaves each the
			// state the last of them would.
			w = 1
			for i+w < len(value) && inert[value[i+w]] {
				w++
			}
			previousSpace, previousBreak, precededByWS = false, false, false
			continue
		}
		w = width(value[i])
		flow, block := indicators(value, i, w, precededByWS)
		t.flowIndicators = t.flowIndicators || flow
		t.blockIndicators = t.blockIndicators || block
		if !isPrintable(value, i) {
			t.specialCharacters = true
		}
		if value[i] == ' ' {
			if i == 0 {
				t.leadingSpace = true
			}
			if i+w == len(value) {
				t.trailingSpace = true
			}
			if previousBreak {
				t.breakSpace = true
			}
			previousSpace, previousBreak = true, false
		} else if isBreak(value, i) {
			t.lineBreaks = true
			if i == 0 {
				t.leadingBreak = true
			}
			if i+w == len(value) {
				t.trailingBreak = true
			}
			if previousSpace {
				t.spaceBreak = true
			}
			previousSpace, previousBreak = false, true
		} else {
			previousSpace, previousBreak = false, false
		}
		precededByWS = isBlankz(value, i)
	}
	return t.analysis()
}

// indicators reports whether the character at value[i], w bytes wide, is a
// flow or a block indicator where it stands: first, or after whitespace
// (precededByWS), or before it.
func indicators(value string, i, w int, precededByWS bool) (flow, block bool) {
	followedByWS := i+w >= len(value) || isBlank(value, i+w)
	if i == 0 {
		switch value[i] {
		case '#', ',', '[', ']', '{', '}', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
			return true, true
		case '?', ':':
			return true, followedByWS
		case '-':
			return followedByWS, followedByWS
		}
		return false, false
	}
	switch value[i] {
	case ',', '?', '[', ']', '{', '}':
		return true, false
	case ':':
		return true, followedByWS
	case '#':
		return precededByWS, precededByWS
	}
	return false, false
}

// scalarTraits are what analyzeScalar finds in a value.
type scalarTraits struct {
	blockIndicators, flowIndicators, lineBreaks, specialCharacters bool
	leadingSpace, leadingBreak, trailingSpace, trailingBreak       bool
	breakSpace, spaceBreak                                         bool
}

// analysis returns the styles a value of traits t may be written in.
func (t scalarTraits) analysis() scalarAnalysis {
	a := scalarAnalysis{multiline: t.lineBreaks, flowPlain: true, blockPlain: true, singleQuoted: true, block: true}
	if t.leadingSpace || t.leadingBreak || t.trailingSpace || t.trailingBreak {
		a.flowPlain, a.blockPlain = false, false
	}
	if t.trailingSpace {
		a.block = false
	}
	if t.breakSpace {
		a.flowPlain, a.blockPlain, a.singleQuoted = false, false, false
	}
	if t.spaceBreak || t.specialCharacters {
		a.flowPlain, a.blockPlain, a.singleQuoted, a.block = false, false, false, false
	}
	if t.lineBreaks {
		a.flowPlain, a.blockPlain = false, false
	}
	if t.flowIndicators {
		a.flowPlain = false
	}
	if t.blockIndicators {
		a.blockPlain = false
	}
	return a
}

func (e *emitter) writePlain(value string, allowBreaks bool) {
	if !e.whitespace {
		e.put(' ')
	}
	spaces, breaks := false, false
	for i := 0; i < len(value); {
		switch {
		case value[i] == ' ':
			if allowBreaks && !spaces && e.column > bestWidth && !isSpace(value, i+1) {
				e.writeIndent()
				e.folds++
				i++
			} else {
				i = e.write(value, i)
			}
			spaces = true
		case isBreak(value, i):
			if !breaks && value[i] == '\n' {
				e.putBreak()
			}
			i = e.writeBreak(value, i)
			e.indention, breaks = true, true
		default:
			if breaks {
				e.writeIndent()
			}
			i = e.writeRun(value, i)
			e.indention, spaces, breaks = false, false, false
		}
	}
	e.whitespace, e.indention = false, false
}

func (e *emitter) writeSingleQuoted(value string, allowBreaks bool) {
	e.writeIndicator("'", true, false, false)
	spaces, breaks := false, false
	for i := 0; i < len(value); {
		switch {
		case value[i] == ' ':
			if allowBreaks && !spaces && e.column > bestWidth && i > 0 && i < len(value)-1 && !isSpace(value, i+1) {
				e.writeIndent()
				e.folds++
				i++
			} else {
				i = e.write(value, i)
			}
			spaces = true
		case isBreak(value, i):
			if !breaks && value[i] == '\n' {
				e.putBreak()
			}
			i = e.writeBreak(value, i)
			e.indention, breaks = true, true
		default:
			if breaks {
				e.writeIndent()
			}
			if value[i] == '\'' {
				e.put('\'')
			}
			i = e.write(value, i)
			e.indention, spaces, breaks = false, false, false
		}
	}
	e.writeIndicator("'", false, false, false)
	e.whitespace, e.indention = false, false
}

const hexDigits = "0123456789ABCDEF"

func (e *emitter) writeDoubleQuoted(value string, allowBreaks bool) {
	spaces := false
	e.writeIndicator(`"`, true, false, false)
	for i := 0; i < len(value); {
		if !isPrintable(value, i) || isBOM(value) || isBreak(value, i) || value[i] == '"' || value[i] == '\\' {
			i = e.writeEscaped(value, i)
			spaces = false
		} else if value[i] == ' ' {
			if allowBreaks && !spaces && e.column > bestWidth && i > 0 && i < len(value)-1 {
				e.writeIndent()
				e.folds++
				if isSpace(value, i+1) {
					e.put('\\')
				}
				i++
			} else {
				i = e.write(value, i)
			}
			spaces = true
		} else {
			i = e.write(value, i)
			spaces = false
		}
	}
	e.writeIndicator(`"`, false, false, false)
	e.whitespace, e.indention = false, false
}

// writeEscaped writes the character at value[i] as a double-quoted scalar's
// escape: a short one where YAML has it, else \x, \u or \U and its code in
// hex. It returns the index of the byte after the character.
func (e *emitter) writeEscaped(value string, i int) int {
	octet := value[i]
	var w int
	var v rune
	switch {
	case octet&0x80 == 0x00:
		w, v = 1, rune(octet&0x7F)
	case octet&0xE0 == 0xC0:
		w, v = 2, rune(octet&0x1F)
	case octet&0xF0 == 0xE0:
		w, v = 3, rune(octet&0x0F)
	case octet&0xF8 == 0xF0:
		w, v = 4, rune(octet&0x07)
	}
	for k := 1; k < w; k++ {
		v = v<<6 + rune(value[i+k])&0x3F
	}
	i += w
	e.put('\\')
	switch v {
	case 0x00:
		e.put('0')
	case 0x07:
		e.put('a')
	case 0x08:
		e.put('b')
	case 0x09:
		e.put('t')
	case 0x0A:
		e.put('n')
	case 0x0b:
		e.put('v')
	case 0x0c:
		e.put('f')
	case 0x0d:
		e.put('r')
	case 0x1b:
		e.put('e')
	case 0x22:
		e.put('"')
	case 0x5c:
		e.put('\\')
	case 0x85:
		e.put('N')
	case 0xA0:
		e.put('_')
	case 0x2028:
		e.put('L')
	case 0x2029:
		e.put('P')
	default:
		switch {
		case v <= 0xFF:
			e.put('x')
			w = 2
		case v <= 0xFFFF:
			e.put('u')
			w = 4
		default:
			e.put('U')
			w = 8
		}
		for k := (w - 1) * 4; k >= 0; k -= 4 {
			e.put(hexDigits[(v>>uint(k))&0x0F])
		}
	}
	return i
}

func (e *emitter) writeLiteral(value string) {
	e.writeIndicator("|", true, false, false)
	// write_block_scalar_hints
	if value[0] == ' ' || isBreak(value, 0) {
		e.writeIndicator(strconv.Itoa(bestIndent), false, false, false)
	}
	chomp := ""
	i := len(value) - 1
	for value[i]&0xC0 == 0x80 {
		i--
	}
	if !isBreak(value, i) {
		chomp = "-"
	} else if i == 0 {
		chomp = "+"
	} else {
		i--
		for value[i]&0xC0 == 0x80 {
			i--
		}
		if isBreak(value, i) {
			chomp = "+"
		}
	}
	if chomp != "" {
		e.writeIndicator(chomp, false, false, false)
	}
	e.putBreak()
	e.indention, e.whitespace = true, true
	breaks := true
	for i := 0; i < len(value); {
		if isBreak(value, i) {
			i = e.writeBreak(value, i)
			e.indention, breaks = true, true
		} else {
			if breaks {
				e.writeIndent()
			}
			i = e.writeRun(value, i)
			e.indention, breaks = false, false
		}
	}
}

// writeRun copies the character at value[i] and the characters after it up to
// the next that may be a space or a line break, and returns the index after
// them: what write does a character at a time, for the characters that its
// callers write alike.
func (e *emitter) writeRun(value string, i int) int {
	j, chars := i, 0
	for j < len(value) && !stops[value[j]] {
		if value[j]&0xC0 != 0x80 {
			chars++
		}
		j++
	}
	if j == i {
		return e.write(value, i)
	}
	e.buf = append(e.buf, value[i:j]...)
	e.column += chars
	return j
}

// stops marks the bytes that may begin a space or a line break: a space, "\r",
// "\n", and the first bytes of U+0085, U+2028 and U+2029.
var stops = func() (t [256]bool) {
	for _, b := range []byte{' ', '\r', '\n', 0xC2, 0xE2} {
		t[b] = true
	}
	return t
}()

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// at returns s[i], or 0 past its end (libyaml's strings end in NUL).
func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func width(b byte) int {
	switch {
	case b&0x80 == 0x00:
		return 1
	case b&0xE0 == 0xC0:
		return 2
	case b&0xF0 == 0xE0:
		return 3
	case b&0xF8 == 0xF0:
		return 4
	}
	return 0
}

func isSpace(s string, i int) bool { return at(s, i) == ' ' }

func isBlank(s string, i int) bool { b := at(s, i); return b == ' ' || b == '\t' }

func isBreak(s string, i int) bool {
	b := at(s, i)
	return b == '\r' || b == '\n' ||
		b == 0xC2 && at(s, i+1) == 0x85 ||
		b == 0xE2 && at(s, i+1) == 0x80 && (at(s, i+2) == 0xA8 || at(s, i+2) == 0xA9)
}

func isBlankz(s string, i int) bool { return isBlank(s, i) || isBreak(s, i) || at(s, i) == 0 }

// isBOM is yaml.v2's is_bom, which looks at the value's first character wherever
// the index is.
func isBOM(s string) bool { return at(s, 0) == 0xEF && at(s, 1) == 0xBB && at(s, 2) == 0xBF }

func isPrintable(s string, i int) bool {
	b, b1, b2 := at(s, i), at(s, i+1), at(s, i+2)
	return b == 0x0A ||
		b >= 0x20 && b <= 0x7E ||
		b == 0xC2 && b1 >= 0xA0 ||
		b > 0xC2 && b < 0xED ||
		b == 0xED && b1 < 0xA0 ||
		b == 0xEE ||
		b == 0xEF && !(b1 == 0xBB && b2 == 0xBF) && !(b1 == 0xBF && (b2 == 0xBE || b2 == 0xBF))
}

// readsAsString reports whether every YAML loader reads s, written plain,
// back as the string s: yaml.v2 (resolvesToString; its encoder also quotes the
// base 60 floats of YAML 1.1, isBase60Float), yaml.v3 (whose resolve reads what
// yaml.v2's does, and 0o octals, which Go's ParseInt reads for yaml.v2 too) and
// the loaders of YAML 1.1, PyYAML's and Ruby's among them (readsAsOther).
// yaml.v2 writes the strings of readsAsOther plain; this writer double-quotes
// them as yaml.v2 does a string it reads as another type.
func readsAsString(s string) bool {
	return resolvesToString(s) && !isBase60Float(s) && !readsAsOther(s)
}

// readsAsOther reports whether a loader of YAML 1.1 reads s, written plain, as
// another type than a string, or refuses it (PyYAML refuses the merge key "<<"
// where no mapping is merged, the value key "=", "0b_" and "2001-13-45"; Ruby's
// safe_load a symbol, ":x"): s is one of the implicit types of the YAML 1.1
// type repository (yaml.org/type), by its regular expressions, by those of
// PyYAML's resolver (lib/yaml/resolver.py), or by those of Ruby's Psych
// (lib/psych/scalar_scanner.rb: symbols, and numbers with commas), whichever
// reads more. The words of the boolean and null types, .inf and .nan are taken
// in any letter case, as Psych takes them.
func readsAsOther(s string) bool {
	if s == "" {
		return true // null
	}
	switch c := s[0]; {
	case c == '<' || c == '=' || c == '~':
		return s == "<<" || len(s) == 1 // merge, value, null
	case c == ':':
		return len(s) > 1 // Psych's symbols
	case c == '+' || c == '-' || c == '.' || c >= '0' && c <= '9':
		for i := 0; i < len(s); i++ {
			if !yaml11NumberBytes[s[i]] {
				return false
			}
		}
		return yaml11Number().MatchString(s)
	case len(s) <= maxWord:
		for _, w := range yaml11Words {
			if strings.EqualFold(s, w) {
				return true
			}
		}
	}
	return false
}

// yaml11Words are the words of YAML 1.1's boolean and null types.
var yaml11Words = []string{"y", "yes", "n", "no", "true", "false", "on", "off", "null"}

// yaml11NumberBytes marks the bytes of yaml11Number's strings.
var yaml11NumberBytes = func() (t [256]bool) {
	for _, b := range []byte("0123456789+-._:,eEbBxXaAcCdDfFiInNtTzZ \t") {
		t[b] = true
	}
	return t
}()

// yaml11Number matches YAML 1.1's ints, floats and timestamps: each of the
// repository's expressions, PyYAML's and Psych's, or one that reads all of
// them. The float's fraction may hold dots, as the repository's does, and
// underscores, as PyYAML's does; PyYAML's exponent needs its sign; Psych's
// numbers may hold commas, its timestamps a year's sign and a zone without
// its colon.
var yaml11Number = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:` +
		// int: binary, octal, decimal, hexadecimal, base 60
		`[-+]?0b[0-1_,]+|[-+]?0[0-7_,]+|[-+]?(?:0|[1-9][0-9_,]*)|[-+]?0x[0-9a-fA-F_,]+|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+` +
		// float: base 10, base 60, infinity, not a number
		`|[-+]?(?:[0-9][0-9_,]*)?\.[0-9._]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*` +
		`|[-+]?\.(?i:inf|nan)` +
		// timestamp
		`|[0-9]{4}-[0-9]{2}-[0-9]{2}` +
		`|-?[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}:?(?:[0-9]{2})?))?` +
		`)$`)
})

// resolvesToString reports whether yaml.v2 reads s, written plain, back as a
// string (its resolve): not a null, boolean, number or timestamp.
func resolvesToString(s string) bool {
	if s == "" {
		return false
	}
	switch c := s[0]; {
	case c == '+' || c == '-' || c >= '0' && c <= '9':
		if !numberish(s) {
			return true
		}
		if isTimestamp(s) {
			return false
		}
		plain := strings.ReplaceAll(s, "_", "")
		if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return false
		}
		if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return false
		}
		if yamlStyleFloat().MatchString(plain) {
			if _, err := strconv.ParseFloat(plain, 64); err == nil {
				return false
			}
		}
		if p, ok := strings.CutPrefix(plain, "0b"); ok {
			if _, err := strconv.ParseInt(p, 2, 64); err == nil {
				return false
			}
			if _, err := strconv.ParseUint(p, 2, 64); err == nil {
				return false
			}
		} else if p, ok := strings.CutPrefix(plain, "-0b"); ok {
			if _, err := strconv.ParseInt("-"+p, 2, 64); err == nil {
				return false
			}
		}
		return !resolvesOther()[s]
	case c == '.':
		if resolvesOther()[s] {
			return false
		}
		_, err := strconv.ParseFloat(s, 64)
		return err != nil
	case strings.IndexByte("yYnNtTfFoO~", c) >= 0:
		return len(s) > maxWord || !resolvesOther()[s]
	}
	return true
}

// maxWord is the length of the longest word of resolvesOther.
const maxWord = 5

// numberBytes marks the bytes that a value beginning with a sign or a digit may
// hold and still be read back as something other than a string: digits, signs,
// "." and "_", the letters of hexadecimal numbers and of the prefixes 0x, 0o and
// 0b, the exponent's e, the letters of "inf" (+.inf) and of a timestamp's "T"
// and "Z", its ":" and its space.
var numberBytes = func() (t [256]bool) {
	for _, b := range []byte("0123456789+-._abcdefABCDEFxXoOiInNtTzZ: ") {
		t[b] = true
	}
	return t
}()

// numberish reports whether every byte of s is a numberBytes byte: else s,
// beginning with a sign or a digit, is no number, timestamp nor word of
// resolvesOther, and resolvesToString need not parse it.
func numberish(s string) bool {
	for i := 0; i < len(s); i++ {
		if !numberBytes[s[i]] {
			return false
		}
	}
	return true
}

// resolvesOther holds the words yaml.v2 reads as a boolean, null or special
// float. It and the regular expressions below are made at their first use, not
// when a program starts.
var resolvesOther = sync.OnceValue(func() map[string]bool {
	words := map[string]bool{}
	for _, w := range strings.Fields("y Y yes Yes YES true True TRUE on On ON n N no No NO false False FALSE off Off OFF " +
		"~ null Null NULL .nan .NaN .NAN .inf .Inf .INF +.inf +.Inf +.INF -.inf -.Inf -.INF") {
		words[w] = true
	}
	return words
})

// isTimestamp is yaml.v2's parseTimestamp: whether s is one of the timestamps it
// reads.
func isTimestamp(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		if c := s[i]; c < '0' || c > '9' {
			break
		}
	}
	if i != 4 || i == len(s) || s[i] != '-' {
		return false
	}
	for _, format := range timestampFormats {
		if _, err := time.Parse(format, s); err == nil {
			return true
		}
	}
	return false
}

var timestampFormats = []string{
	"2006-1-2T15:4:5.999999999Z07:00",
	"2006-1-2t15:4:5.999999999Z07:00",
	"2006-1-2 15:4:5.999999999",
	"2006-1-2",
}

var (
	yamlStyleFloat = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
	})
	base60float = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`)
	})
)

// isBase60Float is yaml.v2's: such values are quoted for older parsers.
func isBase60Float(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	if !(c == '+' || c == '-' || c >= '0' && c <= '9') || strings.IndexByte(s, ':') < 0 {
		return false
	}
	return base60float().MatchString(s)
}
