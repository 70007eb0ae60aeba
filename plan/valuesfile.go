package plan

// EnvValuesFile names a file to which a Run step, once its body has
// succeeded, writes one JSON object of every value it published in
// EnvValues: for each value's name, {"json": its JSON text, "canonical": its
// JSON as decoded and encoded again (what sdk.When compares), "items": the
// text of each element (sdk.ItemText) when it is a list}. An engine that
// reads one file of a step's pod gets every value from it: the airflow
// target points it at the file KubernetesPodOperator's XCom sidecar reads.
const EnvValuesFile = "MANIFOLD_VALUES_FILE"

// PublishedValue is one value of the object in EnvValuesFile.
type PublishedValue struct {
	// JSON is the value's JSON text as the step put it.
	JSON string `json:"json"`
	// Canonical is the value decoded and encoded again: what sdk.When compares.
	Canonical string `json:"canonical"`
	// Items is the text of each element (sdk.ItemText) of a list, and of none
	// for null; it is null for any other value.
	Items []string `json:"items"`
}
