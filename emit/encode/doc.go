// Package encode writes Kubernetes API objects, or any value encoding/json can
// marshal, as the YAML and JSON manifests the targets emit: what the API types
// serialize, less the noise that says nothing.
//
// A value is written in one pass over it, as encoding/json sees it (json tags,
// omitempty, omitzero, MarshalJSON and MarshalText), and cleaned on the way:
// nulls are dropped everywhere (creationTimestamp: null and the like), the
// object's status is dropped, and so is an empty map under a key whose empty
// value means nothing: metadata, status, resources, securityContext, and Argo's
// inputs, outputs and arguments. An empty map under any other key (emptyDir: {})
// means something and is kept.
//
// YAML, WriteYAML, WriteYAMLSeq and WriteYAMLSized write a multi-document YAML
// stream: keys sorted, documents separated by "---", after an optional header
// comment. Its bytes are exactly those of marshaling each object to JSON,
// decoding that into a generic tree, cleaning the tree and encoding it with
// go.yaml.in/yaml/v2 (the encoder behind sigs.k8s.io/yaml), down to each
// scalar's style and quoting and the folding of long strings; the package's
// tests, and FuzzYAMLMatchesYAMLv2, compare the two. But for one thing: a
// string that yaml.v2 writes plain and that a YAML 1.1 loader (PyYAML's,
// Ruby's) reads as another type, or refuses (the merge key <<, the value key
// =, 0_7, 1.2.3, 1,000, :8080, 2001-12-14 21:59:43 +05:30, the booleans in any
// case), is double-quoted, as yaml.v2 double-quotes a string it reads as
// another type: every loader reads each string of the stream as that string.
// No JSON is made and no tree is built on the way. JSON writes the same
// cleaned value as encoding/json writes the cleaned tree: keys in byte order,
// <, > and & not escaped, compact or indented. The same value always gives the
// same bytes.
//
// A Seq, in a value, is a sequence made as it is written: its items are
// written in the bytes of a slice of them, each passed on to the writer
// before the next is made, so that a document of many items (an Argo
// WorkflowTemplate's templates) is never held whole.
package encode
