package encode

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// encoder writes a value as YAML in one pass over it: what encoding/json would
// write (json tags, omitempty, MarshalJSON), less nulls, the empty noise maps and
// the object's status, as yaml.v2 would write that tree with its keys sorted.
// With json set it writes the same tree as compact JSON instead, as
// encoding/json writes a generic tree (keys in byte order, no HTML escaping).
type encoder struct {
	emitter
	json bool
	// w, when set, takes what a Seq has written so far after each of its
	// items (see flush).
	w io.Writer
	// scratch holds a JSON string that jsonEncoder escaped.
	scratch     bytes.Buffer
	jsonEncoder *json.Encoder
	// strings and quantities are the entries of the last map of their kind
	// written, kept for the next.
	strings    []stringEntry
	quantities []quantityEntry
}

// What writing a value wrote.
const (
	wroteNull  = iota // nothing: the value is null, and its key goes too
	wroteEmpty        // an empty mapping, {}
	wroteValue        // anything else
)

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	quantityType      = reflect.TypeFor[resource.Quantity]()
	intOrStringType   = reflect.TypeFor[intstr.IntOrString]()
	timeType          = reflect.TypeFor[metav1.Time]()
	stringMapType     = reflect.TypeFor[map[string]string]()
	resourceListType  = reflect.TypeFor[corev1.ResourceList]()
	anyStringType     = reflect.TypeFor[wfv1.AnyString]()
)

// document writes obj as one YAML document, or one JSON value.
func (e *encoder) document(obj any) error {
	if !e.json {
		e.startDocument()
	}
	if e.value(reflect.ValueOf(obj), ctxRoot) == wroteNull {
		e.plain("null", ctxRoot)
	}
	if !e.json {
		e.endDocument()
	}
	return nil
}

// plain writes a number, a boolean or null.
func (e *encoder) plain(s string, ctx int) {
	if e.json {
		e.buf = append(e.buf, s...)
		return
	}
	e.emitter.plain(s, ctx)
}

// str writes a string.
func (e *encoder) str(s string, ctx int) {
	if e.json {
		e.jsonString(s)
		return
	}
	e.emitter.str(s, ctx)
}

// jsonString writes s as a JSON string, escaped as encoding/json escapes it
// without HTML escaping.
func (e *encoder) jsonString(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			e.scratch.Reset()
			if e.jsonEncoder == nil {
				e.jsonEncoder = json.NewEncoder(&e.scratch)
				e.jsonEncoder.SetEscapeHTML(false)
			}
			if err := e.jsonEncoder.Encode(s); err != nil {
				panic(encodeError{err})
			}
			e.buf = append(e.buf, bytes.TrimSuffix(e.scratch.Bytes(), []byte("\n"))...)
			return
		}
	}
	e.buf = append(e.buf, '"')
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, '"')
}

// jsonComma separates a value from the one before it in its object or array.
func (e *encoder) jsonComma() {
	if n := len(e.buf); n > 0 && e.buf[n-1] != '{' && e.buf[n-1] != '[' {
		e.buf = append(e.buf, ',')
	}
}

// value writes v in context ctx and says what it wrote.
func (e *encoder) value(v reflect.Value, ctx int) int {
	if !v.IsValid() {
		return wroteNull
	}
	if wrote, ok := e.known(v, ctx); ok {
		return wrote
	}
	// A pointer or interface writes what it points to, whose methods encoding/json
	// would call through it.
	if k := v.Kind(); k == reflect.Pointer || k == reflect.Interface {
		if v.IsNil() {
			return wroteNull
		}
		return e.value(v.Elem(), ctx)
	}
	ti := infoOf(v.Type())
	if ti.marshaler || ti.ptrMarshaler && v.CanAddr() {
		return e.marshaled(v, ti, ctx)
	}
	return e.byKind(v, ti, ctx)
}

// known writes v in context ctx when its type is one the encoder writes its
// own way (a Seq, a Quantity, an IntOrString, a zero Time, a string map, a
// ResourceList…), and says what it wrote; ok is false when v is left to value.
func (e *encoder) known(v reflect.Value, ctx int) (wrote int, ok bool) {
	switch v.Type() {
	case seqType:
		if v.IsNil() {
			return wroteNull, true
		}
		e.seq(v.Interface().(Seq), ctx)
		return wroteValue, true
	case quantityType:
		q := v.Interface().(resource.Quantity)
		e.str(q.String(), ctx)
		return wroteValue, true
	case intOrStringType:
		is := v.Interface().(intstr.IntOrString)
		if is.Type == intstr.Int {
			e.plain(strconv.FormatInt(int64(is.IntVal), 10), ctx)
		} else {
			e.str(validUTF8(is.StrVal), ctx)
		}
		return wroteValue, true
	case timeType:
		if tm := v.Interface().(metav1.Time); tm.IsZero() {
			return wroteNull, true
		}
	case anyStringType:
		// What its MarshalJSON writes, a JSON string, reads back as the
		// string with each byte that is not UTF-8 replaced.
		e.str(validUTF8(v.String()), ctx)
		return wroteValue, true
	case stringMapType:
		if v.IsNil() {
			return wroteNull, true
		}
		if v.CanInterface() {
			return e.stringMap(v.Interface().(map[string]string), ctx), true
		}
	case resourceListType:
		if v.IsNil() {
			return wroteNull, true
		}
		if v.CanInterface() {
			return e.resourceList(v.Interface().(corev1.ResourceList), ctx), true
		}
	}
	return 0, false
}

// byKind writes v, of a type with info ti that neither the encoder nor a
// marshaler writes its own way, by its kind in context ctx, and says what it
// wrote.
func (e *encoder) byKind(v reflect.Value, ti *typeInfo, ctx int) int {
	switch v.Kind() {
	case reflect.Bool:
		e.plain(strconv.FormatBool(v.Bool()), ctx)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.plain(strconv.FormatInt(v.Int(), 10), ctx)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.number(json.Number(strconv.FormatUint(v.Uint(), 10)), ctx)
	case reflect.Float32, reflect.Float64:
		data, err := json.Marshal(v.Interface())
		if err != nil {
			panic(encodeError{err})
		}
		e.number(json.Number(data), ctx)
	case reflect.String:
		e.str(validUTF8(v.String()), ctx)
	case reflect.Map:
		if v.IsNil() {
			return wroteNull
		}
		return e.mapValue(v, ctx)
	case reflect.Slice:
		if v.IsNil() {
			return wroteNull
		}
		if v.Type().Elem().Kind() == reflect.Uint8 && !ti.elemMarshals {
			e.str(base64.StdEncoding.EncodeToString(v.Bytes()), ctx)
			return wroteValue
		}
		e.sequence(v, ctx)
	case reflect.Array:
		e.sequence(v, ctx)
	case reflect.Struct:
		return e.structValue(v, ti, ctx)
	default:
		panic(encodeError{fmt.Errorf("json: unsupported type: %s", v.Type())})
	}
	return wroteValue
}

// encodeError carries an error out of the walk.
type encodeError struct{ err error }

// number writes a JSON number as the generic tree did: an integer when it is one,
// else a float.
func (e *encoder) number(n json.Number, ctx int) {
	if i, err := n.Int64(); err == nil {
		e.plain(strconv.FormatInt(i, 10), ctx)
		return
	}
	f, _ := n.Float64()
	if e.json {
		data, err := json.Marshal(f)
		if err != nil {
			panic(encodeError{err})
		}
		e.plain(string(data), ctx)
		return
	}
	e.plain(formatFloat(f), ctx)
}

// formatFloat is yaml.v2's form of a float.
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	switch s {
	case "+Inf":
		return ".inf"
	case "-Inf":
		return "-.inf"
	case "NaN":
		return ".nan"
	}
	return s
}

// marshaled writes what v's MarshalJSON or MarshalText returns.
func (e *encoder) marshaled(v reflect.Value, ti *typeInfo, ctx int) int {
	if !ti.marshaler {
		v = v.Addr()
	}
	if ti.text {
		text, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			panic(encodeError{err})
		}
		e.str(validUTF8(string(text)), ctx)
		return wroteValue
	}
	data, err := v.Interface().(json.Marshaler).MarshalJSON()
	if err != nil {
		panic(encodeError{err})
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		panic(encodeError{fmt.Errorf("json: error calling MarshalJSON for type %s: %w", v.Type(), err)})
	}
	return e.tree(tree, ctx)
}

// tree writes a generic tree decoded from JSON.
func (e *encoder) tree(x any, ctx int) int {
	switch t := x.(type) {
	case nil:
		return wroteNull
	case bool:
		e.plain(strconv.FormatBool(t), ctx)
	case string:
		e.str(t, ctx)
	case json.Number:
		e.number(t, ctx)
	case []any:
		if len(t) == 0 {
			e.emptyFlow("[", "]")
			return wroteValue
		}
		e.beginSequence(ctx)
		for _, item := range t {
			e.item()
			if e.tree(item, ctxSequence) == wroteNull {
				e.plain("null", ctxSequence)
			}
		}
		e.endSequence()
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			if ctx&ctxRoot == 0 || k != "status" {
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, e.keyCompare)
		start := e.beginMapping()
		n := 0
		for _, k := range keys {
			m := e.key(k)
			if r := e.tree(t[k], ctxMapping); r == wroteNull || r == wroteEmpty && noise[k] {
				e.reset(m)
				continue
			}
			n++
		}
		return e.endMapping(start, n)
	}
	return wroteValue
}

func (e *encoder) beginMapping() mark {
	m := e.mark()
	if e.json {
		e.buf = append(e.buf, '{')
		return m
	}
	e.increaseIndent(false, false)
	return m
}

// key writes a mapping key and returns the mark before it.
func (e *encoder) key(k string) mark {
	m := e.mark()
	if e.json {
		e.jsonComma()
		e.jsonString(k)
		e.buf = append(e.buf, ':')
		return m
	}
	e.writeIndent()
	if e.simpleKey(k) {
		e.str(k, ctxMapping|ctxSimpleKey)
		e.writeIndicator(":", false, false, false)
		return m
	}
	e.writeIndicator("?", true, false, true)
	e.str(k, ctxMapping)
	e.writeIndent()
	e.writeIndicator(":", true, false, true)
	return m
}

// fieldKey is key for a struct field's name, written as it stands when
// bareKey says str would write it so.
func (e *encoder) fieldKey(f *fieldInfo) mark {
	if e.json || !f.bareKey {
		return e.key(f.name)
	}
	m := e.mark()
	e.writeIndent()
	if !e.whitespace {
		e.put(' ')
	}
	e.buf = append(e.buf, f.name...)
	e.column += len(f.name)
	e.whitespace, e.indention = false, false
	e.writeIndicator(":", false, false, false)
	return m
}

// endMapping ends a mapping of n entries begun at start: an empty one is written
// {} instead.
func (e *encoder) endMapping(start mark, n int) int {
	if n == 0 {
		e.reset(start)
		e.emptyFlow("{", "}")
		return wroteEmpty
	}
	if e.json {
		e.buf = append(e.buf, '}')
		return wroteValue
	}
	e.popIndent()
	return wroteValue
}

func (e *encoder) emptyFlow(open, close string) {
	if e.json {
		e.buf = append(append(e.buf, open...), close...)
		return
	}
	e.writeIndicator(open, true, true, false)
	e.increaseIndent(true, false)
	e.popIndent()
	e.writeIndicator(close, false, false, false)
}

func (e *encoder) beginSequence(ctx int) {
	if e.json {
		e.buf = append(e.buf, '[')
		return
	}
	e.increaseIndent(false, ctx&ctxMapping != 0 && !e.indention)
}

func (e *encoder) item() {
	if e.json {
		e.jsonComma()
		return
	}
	e.writeIndent()
	e.writeIndicator("-", true, false, true)
}

func (e *encoder) endSequence() {
	if e.json {
		e.buf = append(e.buf, ']')
		return
	}
	e.popIndent()
}

func (e *encoder) sequence(v reflect.Value, ctx int) {
	n := v.Len()
	if n == 0 {
		e.emptyFlow("[", "]")
		return
	}
	e.beginSequence(ctx)
	for i := range n {
		e.item()
		if e.value(v.Index(i), ctxSequence) == wroteNull {
			e.plain("null", ctxSequence)
		}
	}
	e.endSequence()
}

// Seq is a sequence whose items are made as it is written: a value of this
// type (a field, a map's value, an item) is written as the sequence of what it
// yields, as a slice of the same items would be, each item written before the
// next is made. By WriteYAML, WriteYAMLSeq and WriteYAMLSized, what is written
// of the document is passed on to the writer as the items are written, so that
// a document with a Seq of many items is never held whole. A nil Seq is
// written as a nil slice is: not at all. A Seq that yields nothing is written
// as [], as an empty slice is.
type Seq iter.Seq[any]

var seqType = reflect.TypeFor[Seq]()

// Item is an item of a Seq that is told the YAML it was written as: Written,
// when not nil, is called with the text of the item, from the line break
// before its "-" to its last character, before the text is passed on, and
// whether a line of a long string in it was folded (at the 80th column, as
// yaml.v2 folds a plain or quoted string at a space past it): where none was,
// the item written at any shallower indentation has the same lines, less
// the indentation.
type Item struct {
	Value   any
	Written func(text []byte, folded bool)
}

// flushAt is how much written text the encoder holds before a Seq passes it on.
const flushAt = 64 << 10

// seq writes the items s yields as a sequence.
func (e *encoder) seq(s Seq, ctx int) {
	e.beginSequence(ctx)
	n := 0
	for item := range s {
		n++
		it, observed := item.(Item)
		if observed {
			item = it.Value
		}
		start, folds := len(e.buf), e.folds
		e.item()
		if e.value(reflect.ValueOf(item), ctxSequence) == wroteNull {
			e.plain("null", ctxSequence)
		}
		if observed && it.Written != nil && !e.json {
			it.Written(e.buf[start:], e.folds != folds)
		}
		e.flush()
	}
	if n == 0 {
		if !e.json {
			e.popIndent() // as though begun, never
		} else {
			e.buf = e.buf[:len(e.buf)-1] // the "["
		}
		e.emptyFlow("[", "]")
		return
	}
	e.endSequence()
}

// flush writes to w what the encoder holds, once it holds flushAt bytes or
// more.
func (e *encoder) flush() {
	if e.w == nil || e.json || len(e.buf) < flushAt {
		return
	}
	if _, err := e.w.Write(e.buf); err != nil {
		panic(encodeError{err})
	}
	e.flushed += len(e.buf)
	e.buf = e.buf[:0]
}

func (e *encoder) mapValue(v reflect.Value, ctx int) int {
	type entry struct {
		key string
		v   reflect.Value
	}
	entries := make([]entry, 0, v.Len())
	for it := v.MapRange(); it.Next(); {
		k := mapKey(it.Key())
		if ctx&ctxRoot != 0 && k == "status" {
			continue
		}
		entries = append(entries, entry{k, it.Value()})
	}
	slices.SortFunc(entries, func(a, b entry) int { return e.keyCompare(a.key, b.key) })
	start := e.beginMapping()
	n := 0
	for _, en := range entries {
		m := e.key(en.key)
		if r := e.value(en.v, ctxMapping); r == wroteNull || r == wroteEmpty && noise[en.key] {
			e.reset(m)
			continue
		}
		n++
	}
	return e.endMapping(start, n)
}

// stringMap is mapValue for the maps of strings that labels, annotations and
// node selectors are, without reflection.
func (e *encoder) stringMap(m map[string]string, ctx int) int {
	entries := e.strings[:0]
	for k, v := range m {
		k = validUTF8(k)
		if ctx&ctxRoot != 0 && k == "status" {
			continue
		}
		entries = append(entries, stringEntry{k, v})
	}
	slices.SortFunc(entries, func(a, b stringEntry) int { return e.keyCompare(a.key, b.key) })
	start := e.beginMapping()
	for _, en := range entries {
		e.key(en.key)
		e.str(validUTF8(en.value), ctxMapping)
	}
	clear(entries)
	e.strings = entries[:0]
	return e.endMapping(start, len(entries))
}

// The entries of a map that stringMap and resourceList write, whose slices
// the encoder keeps for the next map: their values hold no map.
type (
	stringEntry   struct{ key, value string }
	quantityEntry struct {
		key   string
		value resource.Quantity
	}
)

// resourceList is mapValue for a container's requests and limits, without
// reflection.
func (e *encoder) resourceList(l corev1.ResourceList, ctx int) int {
	entries := e.quantities[:0]
	for k, q := range l {
		key := validUTF8(string(k))
		if ctx&ctxRoot != 0 && key == "status" {
			continue
		}
		entries = append(entries, quantityEntry{key, q})
	}
	slices.SortFunc(entries, func(a, b quantityEntry) int { return e.keyCompare(a.key, b.key) })
	start := e.beginMapping()
	for i := range entries {
		e.key(entries[i].key)
		e.str(entries[i].value.String(), ctxMapping)
	}
	clear(entries)
	e.quantities = entries[:0]
	return e.endMapping(start, len(entries))
}

// mapKey is the JSON object key of map key k.
func mapKey(k reflect.Value) string {
	switch k.Kind() {
	case reflect.String:
		return validUTF8(k.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10)
	}
	if tm, ok := k.Interface().(encoding.TextMarshaler); ok {
		text, err := tm.MarshalText()
		if err != nil {
			panic(encodeError{err})
		}
		return validUTF8(string(text))
	}
	panic(encodeError{fmt.Errorf("json: unsupported map key type %s", k.Type())})
}

func (e *encoder) structValue(v reflect.Value, ti *typeInfo, ctx int) int {
	start := e.beginMapping()
	n := 0
	fields := ti.fields
	if e.json {
		fields = ti.jsonFields
	}
fields:
	for i := range fields {
		f := &fields[i]
		if ctx&ctxRoot != 0 && f.name == "status" {
			continue
		}
		fv := v
		for j, x := range f.index {
			if j > 0 && fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue fields
				}
				fv = fv.Elem()
			}
			fv = fv.Field(x)
		}
		if f.omitEmpty && isEmptyValue(fv) || f.omitZero && isZero(fv) {
			continue
		}
		m := e.fieldKey(f)
		var r int
		if f.quoted {
			r = e.quoted(fv, ctxMapping)
		} else {
			r = e.value(fv, ctxMapping)
		}
		if r == wroteNull || r == wroteEmpty && f.noise {
			e.reset(m)
			continue
		}
		n++
	}
	return e.endMapping(start, n)
}

// quoted writes a field tagged ",string": its number, boolean or JSON-quoted
// string as a string.
func (e *encoder) quoted(v reflect.Value, ctx int) int {
	switch v.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		data, err := json.Marshal(v.Interface())
		if err != nil {
			panic(encodeError{err})
		}
		e.str(string(data), ctx)
		return wroteValue
	}
	return e.value(v, ctx)
}

func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// isZero is encoding/json's test for omitzero: the value's IsZero method, or the
// zero value.
func isZero(v reflect.Value) bool {
	if z, ok := v.Interface().(interface{ IsZero() bool }); ok {
		if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
			return true
		}
		return z.IsZero()
	}
	return v.IsZero()
}

// validUTF8 replaces each byte of s that is not UTF-8 with U+FFFD, as
// encoding/json does.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// keyCompare orders the keys of a mapping: as keyCompare, or in byte order as
// encoding/json does when writing JSON.
func (e *encoder) keyCompare(a, b string) int {
	if e.json {
		return strings.Compare(a, b)
	}
	return keyCompare(a, b)
}

// keyCompare orders mapping keys as yaml.v2 sorts string keys: by character,
// letters after other characters, runs of digits by their numeric value.
func keyCompare(a, b string) int {
	if a == b {
		return 0
	}
	if keyLess(a, b) {
		return -1
	}
	return 1
}

func keyLess(a, b string) bool {
	if isASCII(a) && isASCII(b) {
		return runesLess([]byte(a), []byte(b))
	}
	return runesLess([]rune(a), []rune(b))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// runesLess is yaml.v2's keyList.Less on two strings, as bytes when both are
// ASCII (one byte a character) or as runes.
func runesLess[E byte | rune](ar, br []E) bool {
	for i := 0; i < len(ar) && i < len(br); i++ {
		if ar[i] == br[i] {
			continue
		}
		al, bl := unicode.IsLetter(rune(ar[i])), unicode.IsLetter(rune(br[i]))
		if al && bl {
			return ar[i] < br[i]
		}
		if al || bl {
			return bl
		}
		var ai, bi int
		var an, bn int64
		if ar[i] == '0' || br[i] == '0' {
			for j := i - 1; j >= 0 && unicode.IsDigit(rune(ar[j])); j-- {
				if ar[j] != '0' {
					an, bn = 1, 1
					break
				}
			}
		}
		for ai = i; ai < len(ar) && unicode.IsDigit(rune(ar[ai])); ai++ {
			an = an*10 + int64(rune(ar[ai])-'0')
		}
		for bi = i; bi < len(br) && unicode.IsDigit(rune(br[bi])); bi++ {
			bn = bn*10 + int64(rune(br[bi])-'0')
		}
		if an != bn {
			return an < bn
		}
		if ai != bi {
			return ai < bi
		}
		return ar[i] < br[i]
	}
	return len(ar) < len(br)
}

// typeInfo is what the encoder needs to know of a type, worked out once.
type typeInfo struct {
	// marshaler: the type has MarshalJSON (or, with text, MarshalText);
	// ptrMarshaler: its pointer has.
	marshaler, ptrMarshaler, text bool
	// elemMarshals: a []byte-like slice whose elements marshal themselves, which
	// encoding/json writes as an array.
	elemMarshals bool
	// fields of a struct, in the order of their keys in YAML (keyCompare), and in
	// JSON (byte order).
	fields, jsonFields []fieldInfo
}

type fieldInfo struct {
	name                        string
	index                       []int
	omitEmpty, omitZero, quoted bool
	noise                       bool // an empty mapping under this name is dropped
	depth                       int
	tagged                      bool
	// bareKey: the name is a simple key that str writes as it stands (bare,
	// read back as a string, ASCII), as most are.
	bareKey bool
}

var typeInfos sync.Map // reflect.Type → *typeInfo

func infoOf(t reflect.Type) *typeInfo {
	if ti, ok := typeInfos.Load(t); ok {
		return ti.(*typeInfo)
	}
	ti := &typeInfo{}
	switch {
	case t.Implements(marshalerType):
		ti.marshaler = true
	case reflect.PointerTo(t).Implements(marshalerType):
		ti.ptrMarshaler = true
	case t.Kind() != reflect.String && t.Implements(textMarshalerType):
		ti.marshaler, ti.text = true, true
	case t.Kind() != reflect.String && reflect.PointerTo(t).Implements(textMarshalerType):
		ti.ptrMarshaler, ti.text = true, true
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
		p := reflect.PointerTo(t.Elem())
		ti.elemMarshals = p.Implements(marshalerType) || p.Implements(textMarshalerType)
	}
	if t.Kind() == reflect.Struct {
		ti.fields = structFields(t)
		ti.jsonFields = slices.SortedStableFunc(slices.Values(ti.fields), func(a, b fieldInfo) int { return strings.Compare(a.name, b.name) })
	}
	actual, _ := typeInfos.LoadOrStore(t, ti)
	return actual.(*typeInfo)
}

// structFields lists the fields encoding/json writes for struct type t, embedded
// structs' fields promoted by its rules, sorted by key.
func structFields(t reflect.Type) []fieldInfo {
	var all []fieldInfo
	var walk func(t reflect.Type, index []int, depth int, seen map[reflect.Type]bool)
	walk = func(t reflect.Type, index []int, depth int, seen map[reflect.Type]bool) {
		if seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			sf := t.Field(i)
			ft := sf.Type
			if sf.Anonymous {
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if !sf.IsExported() && ft.Kind() != reflect.Struct {
					continue
				}
			} else if !sf.IsExported() {
				continue
			}
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(slices.Clone(index), i)
			if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
				walk(ft, idx, depth+1, seen)
				continue
			}
			f := fieldInfo{name: name, index: idx, depth: depth, tagged: name != ""}
			if name == "" {
				f.name = sf.Name
			}
			for opt := range strings.SplitSeq(opts, ",") {
				switch opt {
				case "omitempty":
					f.omitEmpty = true
				case "omitzero":
					f.omitZero = true
				case "string":
					switch ft.Kind() {
					case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
						reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
						reflect.Float32, reflect.Float64, reflect.String:
						f.quoted = true
					}
				}
			}
			f.noise = noise[f.name]
			f.bareKey = len(f.name) <= maxSimpleKey && bare(f.name) && readsAsString(f.name)
			all = append(all, f)
		}
		delete(seen, t)
	}
	walk(t, nil, 0, map[reflect.Type]bool{})

	// Of the fields of one name, the shallowest wins, then the one tagged; a tie
	// hides them all.
	byName := map[string][]fieldInfo{}
	for _, f := range all {
		byName[f.name] = append(byName[f.name], f)
	}
	var out []fieldInfo
	for _, f := range all {
		fs := byName[f.name]
		if len(fs) == 0 {
			continue
		}
		delete(byName, f.name)
		if dominant, ok := dominantField(fs); ok {
			out = append(out, dominant)
		}
	}
	slices.SortStableFunc(out, func(a, b fieldInfo) int { return keyCompare(a.name, b.name) })
	return out
}

func dominantField(fs []fieldInfo) (fieldInfo, bool) {
	if len(fs) == 1 {
		return fs[0], true
	}
	slices.SortStableFunc(fs, func(a, b fieldInfo) int { return a.depth - b.depth })
	top := fs[:1]
	for _, f := range fs[1:] {
		if f.depth == fs[0].depth {
			top = append(top, f)
		}
	}
	if len(top) == 1 {
		return top[0], true
	}
	var tagged []fieldInfo
	for _, f := range top {
		if f.tagged {
			tagged = append(tagged, f)
		}
	}
	if len(tagged) == 1 {
		return tagged[0], true
	}
	return fieldInfo{}, false
}
