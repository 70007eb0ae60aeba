package compile

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/manifoldflow/manifold/internal/suggest"
	"github.com/manifoldflow/manifold/sdk"
)

// setOptions maps each option ParseSet knows to the option it makes from a value.
// Values are only parsed here; Compile checks them exactly as it checks options
// in code.
var setOptions = map[string]func(string) (sdk.StepOption, error){
	"cpu":             str(func(v string) sdk.StepOption { return sdk.CPU(v) }),
	"memory":          str(func(v string) sdk.StepOption { return sdk.Memory(v) }),
	"disk":            str(func(v string) sdk.StepOption { return sdk.Disk(v) }),
	"sharedMemory":    str(func(v string) sdk.StepOption { return sdk.SharedMemory(v) }),
	"gpu":             integer(func(n int) sdk.StepOption { return sdk.GPU(n) }),
	"gpuVendor":       str(func(v string) sdk.StepOption { return sdk.GPUVendor(v) }),
	"trainium":        integer(func(n int) sdk.StepOption { return sdk.Trainium(n) }),
	"inferentia":      integer(func(n int) sdk.StepOption { return sdk.Inferentia(n) }),
	"efa":             efaValue,
	"instanceType":    str(func(v string) sdk.StepOption { return sdk.InstanceType(v) }),
	"image":           str(func(v string) sdk.StepOption { return sdk.Image(v) }),
	"imagePullPolicy": str(func(v string) sdk.StepOption { return sdk.ImagePullPolicy(v) }),
	"serviceAccount":  str(func(v string) sdk.StepOption { return sdk.ServiceAccount(v) }),
	"namespace":       str(func(v string) sdk.StepOption { return sdk.Namespace(v) }),
	"port":            integer(func(n int) sdk.StepOption { return sdk.Port(n) }),
	"nodes":           integer(func(n int) sdk.StepOption { return sdk.Nodes(n) }),
	"retry":           integer(func(n int) sdk.StepOption { return sdk.Retry(n) }),
	"retryBackoff":    duration(func(d time.Duration) sdk.StepOption { return sdk.RetryBackoff(d) }),
	"timeout":         duration(func(d time.Duration) sdk.StepOption { return sdk.Timeout(d) }),
}

// SetOptions names the options ParseSet knows, sorted.
func SetOptions() []string { return slices.Sorted(maps.Keys(setOptions)) }

// ParseSet parses an override of a step option written STEP.OPTION=VALUE, such
// as train.efa=4 or train.timeout=2h (the CLI's --set), into the step's name
// and the option, for Options.Overrides. It checks only the form and the
// value's type; Compile checks the step and the value.
func ParseSet(s string) (step string, opt sdk.StepOption, err error) {
	lhs, value, ok := strings.Cut(s, "=")
	step, name, dot := strings.Cut(lhs, ".")
	if !ok || !dot || step == "" || name == "" {
		return "", nil, errors.New("write STEP.OPTION=VALUE, such as train.efa=4")
	}
	build, known := setOptions[name]
	if !known {
		return "", nil, fmt.Errorf("unknown option %q; the options are %s%s", name, strings.Join(SetOptions(), ", "), suggest.DidYouMean(name, SetOptions()))
	}
	if opt, err = build(value); err != nil {
		return "", nil, err
	}
	return step, opt, nil
}

func str(f func(string) sdk.StepOption) func(string) (sdk.StepOption, error) {
	return func(v string) (sdk.StepOption, error) { return f(v), nil }
}

func integer(f func(int) sdk.StepOption) func(string) (sdk.StepOption, error) {
	return func(v string) (sdk.StepOption, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", v)
		}
		return f(n), nil
	}
}

func duration(f func(time.Duration) sdk.StepOption) func(string) (sdk.StepOption, error) {
	return func(v string) (sdk.StepOption, error) {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration such as 90s, 30m or 6h", v)
		}
		return f(d), nil
	}
}

// efaValue takes a count, or "all" for EFAAll.
func efaValue(v string) (sdk.StepOption, error) {
	if v == "all" {
		return sdk.EFAAll(), nil
	}
	return integer(func(n int) sdk.StepOption { return sdk.EFA(n) })(v)
}
