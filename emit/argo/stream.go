package argo

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"reflect"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/plan"
)

// A WorkflowTemplate as it is written as it is made: the same fields, in the
// same bytes, but for its templates and its DAG's tasks, each made as it is
// written (encode.Seq). The fields of these types shadow those of the types
// they embed, which are left empty.
type (
	streamedTemplate struct {
		wfv1.WorkflowTemplate
		Spec streamedSpec `json:"spec"`
	}
	streamedSpec struct {
		wfv1.WorkflowSpec
		Templates encode.Seq `json:"templates,omitempty"`
	}
	streamedEntry struct {
		wfv1.Template
		DAG *streamedDAG `json:"dag,omitempty"`
	}
	streamedDAG struct {
		wfv1.DAGTemplate
		Tasks encode.Seq `json:"tasks"`
	}
)

// head returns the maker's WorkflowTemplate without its templates.
func (m *maker) head() *wfv1.WorkflowTemplate {
	return &wfv1.WorkflowTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "WorkflowTemplate"},
		ObjectMeta: objectMeta(m.f, m.name),
		Spec:       m.spec,
	}
}

// observed is obj, an item of step i, as the item of a Seq that gives measure
// its text, and whether a long string's line was folded in it, when measure
// is set.
func observed(i int, obj any, measure measureFunc) any {
	if measure == nil {
		return obj
	}
	return encode.Item{Value: obj, Written: func(text []byte, folded bool) { measure(i, obj, text, folded) }}
}

// A measureFunc is given each template and task of a WorkflowTemplate once
// written: the index of its step, the object, the text it was written as and
// whether a long string's line was folded in it (see encode.Item).
type measureFunc func(step int, obj any, text []byte, folded bool)

// document returns the maker's WorkflowTemplate (of every step: in is nil) as
// a value that encode writes in the bytes of build's, each step's templates
// and tasks made as they are written and let go once written. The first error
// in making them stops the document short and is put in errs. When measure is
// set, it is given each template and task once written.
func (m *maker) document(errs *field.ErrorList, measure measureFunc) any {
	if m.in != nil {
		panic("argo: a part's WorkflowTemplate is built, not streamed")
	}
	tasks := func(yield func(any) bool) {
		for i := range m.f.Steps {
			_, tks, e := m.step(i, false)
			if len(e) > 0 {
				*errs = e
				return
			}
			for k := range tks {
				if !yield(observed(i, &tks[k], measure)) {
					return
				}
			}
		}
	}
	templates := func(yield func(any) bool) {
		entry := &streamedEntry{Template: wfv1.Template{Name: Entrypoint}, DAG: &streamedDAG{Tasks: tasks}}
		if !yield(entry) || len(*errs) > 0 {
			return
		}
		for i := range m.f.Steps {
			ts, _, e := m.step(i, true)
			if len(e) > 0 {
				*errs = e
				return
			}
			for k := range ts {
				if !yield(observed(i, &ts[k], measure)) {
					return
				}
			}
		}
	}
	head := m.head()
	return &streamedTemplate{WorkflowTemplate: *head, Spec: streamedSpec{WorkflowSpec: head.Spec, Templates: templates}}
}

// costs estimates what each step adds to the maker's WorkflowTemplate, of
// wtSize bytes (measured here when -1): its templates' and tasks' sizes, each
// alone, scaled so that they add up to wtSize less fixed, the bytes no step
// has (the documents nest templates and tasks deeper than alone: the
// difference is spread over the steps by their size). The WorkflowTemplate is
// made, measured and let go a step at a time.
func (m *maker) costs(wtSize int) (cost []int, fixed int, errs field.ErrorList) {
	raw := make([]int, len(m.f.Steps))
	var sum int
	var err error
	measure := func(i int, obj any, text []byte, folded bool) {
		n, ok := alone(text, folded)
		if !ok {
			var e error
			if n, e = size(obj); e != nil && err == nil {
				err = e
			}
		}
		raw[i] += n
		sum += n
	}
	given := wtSize
	n, e := costsOf(m, &errs, measure)
	if wtSize < 0 {
		wtSize = n
	}
	if len(errs) > 0 {
		return nil, 0, errs
	}
	if err = cmp.Or(err, e); err != nil {
		return nil, 0, field.ErrorList{field.InternalError(nil, err)}
	}
	if c := m.counting; c != nil {
		// The templates were made with a guess of what the steps share
		// (newGuessingMaker): measure again with the truth if it differs.
		m.counting = nil
		spec, sh := workflowSpec(m.f, c, m.multi, m.literal)
		if !reflect.DeepEqual(spec, m.spec) || !reflect.DeepEqual(sh, m.sh) {
			m.spec, m.sh = spec, sh
			return m.costs(given)
		}
	}
	empty := m.head()
	empty.Spec.Templates = []wfv1.Template{{Name: Entrypoint, DAG: &wfv1.DAGTemplate{}}}
	if fixed, err = size(empty); err != nil {
		return nil, 0, field.ErrorList{field.InternalError(nil, err)}
	}
	cost = make([]int, len(raw))
	for i, n := range raw {
		cost[i] = int(int64(n) * int64(wtSize-fixed) / int64(max(sum, 1)))
	}
	return cost, fixed, nil
}

// alone returns the size of the YAML document of an item of a sequence, from
// text, the item as the sequence holds it (encode.Item): the same lines, less
// the indentation and "- " before each, and ending in a line break. It reports
// false when it cannot tell: when a long string's line was folded in text
// (folded: a string folded at the 80th column in one place might not be at
// a shallower one; one not folded is not folded there either), or text is not
// of that form.
func alone(text []byte, folded bool) (int, bool) {
	if folded {
		return 0, false
	}
	first, rest, ok := bytes.Cut(text, []byte("\n"))
	if !ok || len(first) != 0 {
		return 0, false // not an item on lines of its own
	}
	n, indent := 0, -1
	for line := range bytes.SplitSeq(rest, []byte("\n")) {
		if indent < 0 {
			// The first line: its indentation and "- ".
			dash := bytes.IndexByte(line, '-')
			if dash < 0 || len(line) < dash+2 || line[dash+1] != ' ' || len(bytes.TrimLeft(line[:dash], " ")) != 0 {
				return 0, false
			}
			indent = dash + 2
		} else if len(line) > 0 && (len(line) < indent || len(bytes.TrimLeft(line[:indent], " ")) != 0) {
			return 0, false
		}
		if len(line) > 0 {
			n += len(line) - indent
		}
		n++ // the line break
	}
	return n, true
}

// costsOf writes the maker's WorkflowTemplate to nothing, giving measure
// each template and task, and returns its size.
func costsOf(m *maker, errs *field.ErrorList, measure measureFunc) (int, error) {
	size := 0
	err := encode.WriteYAMLSized(io.Discard, "", one(m.document(errs, measure)), func(n int) { size = n })
	return size, err
}

// one is the sequence of obj alone.
func one(obj any) func(func(any) bool) {
	return func(yield func(any) bool) { yield(obj) }
}

// writeTemplates writes <flow>.argo.yaml, the objects Objects returns, each
// made as it is written. A flow of at most PartMaxNodes nodes, or without
// argo_max_bytes, is written as one WorkflowTemplate, made a step at a time,
// its bytes counted; if they prove too many, the file is written again, split.
// A flow of more nodes is always split: its one WorkflowTemplate is made and
// measured a step at a time, without being written, to cut it into parts
// (Cut), and the parts (each at most PartNodes nodes, or PartMaxNodes for one
// larger step, built whole), then
// the parent, are written in turn; should a part prove over budget once made,
// the file is written again, cut smaller.
func writeTemplates(f *plan.Flow, create emit.Create) field.ErrorList {
	file := templateFile{
		create: create,
		name:   f.Name + ".argo.yaml",
		header: fmt.Sprintf("Argo Workflows objects of flow %s, generated by manifold.", f.Name),
	}
	limit := maxBytes(f)
	wtName := emit.Name(emit.MaxNameLength, f.Name)
	var m *maker
	wtSize := -1
	if limit >= 0 && flowNodes(f) > PartMaxNodes {
		// Never written whole, only measured: its pods built once for it.
		m = newGuessingMaker(f, wtName)
	} else {
		m = newMaker(f, wtName, nil, RunID, false)
		var errs field.ErrorList
		var split bool
		if wtSize, split, errs = writeWhole(f, m, file); !split {
			return errs
		}
	}
	in := make([]bool, len(f.Steps))
	budget := min(limit, PartMaxBytes)
	return cutParts(f, m, wtSize, func(parts []Part) (int, int, field.ErrorList) {
		return writeParts(f, m, file, parts, in, budget)
	})
}

// templateFile is the file of a flow's Argo objects, written again each time
// the flow is cut anew.
type templateFile struct {
	create       emit.Create
	name, header string
}

// write writes objects to the file, telling sized the byte size of each.
func (t templateFile) write(objects func(yield func(any) bool), sized func(n int)) error {
	w, err := t.create(t.name)
	if err != nil {
		return err
	}
	return encode.WriteYAMLSized(w, t.header, objects, sized)
}

// writeWhole writes flow f as one WorkflowTemplate made by m (and its
// CronWorkflow when it has a schedule), and returns the template's size. It
// says whether the template proved too large and the flow must be split;
// otherwise the file is done, or errs says why not.
func writeWhole(f *plan.Flow, m *maker, file templateFile) (wtSize int, split bool, errs field.ErrorList) {
	wtSize = -1
	wt := m.head()
	objects := func(yield func(any) bool) {
		if !yield(m.document(&errs, nil)) || len(errs) > 0 || needsSplit(f, wtSize) {
			return
		}
		if f.Schedule != "" {
			yield(CronWorkflow(f, wt))
		}
	}
	err := file.write(objects, func(n int) {
		if wtSize < 0 {
			wtSize = n
		}
	})
	if err != nil {
		return wtSize, false, field.ErrorList{field.InternalError(nil, err)}
	}
	if len(errs) > 0 || !needsSplit(f, wtSize) {
		return wtSize, false, errs
	}
	return wtSize, true, nil
}

// writeParts writes flow f cut into parts, made by m: each part, then the
// parent (and its CronWorkflow when the flow has a schedule). It stops at
// the first part over budget bytes and returns its index (-1 when none is),
// with the size of the last object written.
func writeParts(f *plan.Flow, m *maker, file templateFile, parts []Part, in []bool, budget int) (over, last int, errs field.ErrorList) {
	over = -1
	objects := func(yield func(any) bool) {
		for k, p := range parts {
			part, e := buildPart(m, p, in)
			if len(e) > 0 {
				errs = e
				return
			}
			if !yield(part) {
				return
			}
			if last > budget {
				over = k
				return
			}
		}
		// The head once measured: what the steps share is known.
		parent, err := parentTemplate(f, m.head(), parts)
		if err != nil {
			errs = field.ErrorList{field.InternalError(nil, err)}
			return
		}
		if !yield(parent) {
			return
		}
		if errs = parentTooLarge(f, parts, last); len(errs) > 0 {
			return
		}
		if f.Schedule != "" {
			yield(CronWorkflow(f, parent))
		}
	}
	if err := file.write(objects, func(n int) { last = n }); err != nil {
		return -1, 0, field.ErrorList{field.InternalError(nil, err)}
	}
	return over, last, errs
}
