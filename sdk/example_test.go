package sdk_test

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// The examples compile a small flow (package compile) and print part of what it
// compiles to: the plan of a step, or the pod every target runs for it (package
// emit). A flow program does neither itself: its main is cli.Main(flow), whose
// compile, validate and run commands do.

// compiled compiles f with no config and returns its plan, or prints its errors
// and returns nil.
func compiled(f *sdk.Flow) *plan.Flow {
	p, errs := compile.Compile(f, compile.Options{})
	for _, err := range errs {
		fmt.Println(err)
	}
	return p
}

// pod compiles f and returns the pod that every target runs for its step name.
func pod(f *sdk.Flow, name string) corev1.PodSpec {
	p := compiled(f)
	if p == nil {
		return corev1.PodSpec{}
	}
	return emit.Pod(p, p.Step(name), emit.PodOptions{}).Spec
}

// show prints v as YAML.
func show(v any) {
	b, err := yaml.Marshal(v)
	if err != nil {
		fmt.Println(err)
	}
	fmt.Print(string(b))
}

const img = "registry.example.com/ml/flow:v1"

func Example() {
	f := sdk.NewFlow("neuron-train",
		sdk.Image(img),
		sdk.Param("epochs", "3"),
	).
		Step("prepare", sdk.Run(func(ctx *sdk.Context) error {
			return ctx.Put("shards", []string{"shard-000", "shard-001"})
		}), sdk.CPU("4"), sdk.Memory("16Gi")).
		Step("train", sdk.After("prepare"),
			sdk.Command("torchrun", "train.py", "--epochs", "$(MANIFOLD_PARAM_EPOCHS)"),
			sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.EFAWiring(),
			sdk.Nodes(2), sdk.Retry(2), sdk.Timeout(6*time.Hour))

	p := compiled(f)
	for _, s := range p.Steps {
		fmt.Printf("%s: after %v; nodes %d, Neuron devices %d, EFA interfaces %d\n", s.Name, s.After, s.Nodes, s.Neuron, s.EFA)
	}
	// Output:
	// prepare: after []; nodes 1, Neuron devices 0, EFA interfaces 0
	// train: after [prepare]; nodes 2, Neuron devices 16, EFA interfaces 8
}

func ExampleNewFlow() {
	// Options given to the flow are the defaults of every step.
	f := sdk.NewFlow("etl", sdk.Image(img), sdk.CPU("2")).
		Step("extract", sdk.Command("extract")).
		Step("load", sdk.Command("load"), sdk.After("extract"), sdk.CPU("8"))
	for _, name := range []string{"extract", "load"} {
		fmt.Println(name, pod(f, name).Containers[0].Resources.Requests.Cpu())
	}
	// Output:
	// extract 2
	// load 8
}

func ExampleFlow_Step() {
	f := sdk.NewFlow("hello", sdk.Image(img)).
		Step("greet", sdk.Command("echo", "hello")).
		Step("shout", sdk.Command("echo", "HELLO"), sdk.After("greet"))
	for _, s := range compiled(f).Steps {
		fmt.Println(s.Name, s.Command)
	}
	// Output:
	// greet [echo hello]
	// shout [echo HELLO]
}

func ExampleRun() {
	// A Run step runs the flow's own binary, which its image must contain: the
	// binary's step command calls the function.
	f := sdk.NewFlow("hello", sdk.Image(img)).
		Step("greet", sdk.Run(func(ctx *sdk.Context) error {
			fmt.Println("hello from", ctx.Step())
			return nil
		}))
	fmt.Println(pod(f, "greet").Containers[0].Command)
	// Output:
	// [/usr/local/bin/hello step greet]
}

func ExampleCommand() {
	f := sdk.NewFlow("train", sdk.Image(img), sdk.Param("epochs", "3")).
		Step("train", sdk.Command("python", "train.py", "--epochs", "$(MANIFOLD_PARAM_EPOCHS)"))
	c := pod(f, "train").Containers[0]
	fmt.Println(c.Command)
	for _, e := range c.Env {
		fmt.Printf("%s=%s\n", e.Name, e.Value)
	}
	// Output:
	// [python train.py --epochs $(MANIFOLD_PARAM_EPOCHS)]
	// MANIFOLD_PARAM_EPOCHS=3
}

func ExampleAfter() {
	f := sdk.NewFlow("diamond", sdk.Image(img)).
		Step("join", sdk.Command("join"), sdk.After("left", "right")).
		Step("left", sdk.Command("left"), sdk.After("split")).
		Step("right", sdk.Command("right"), sdk.After("split")).
		Step("split", sdk.Command("split"))
	// The plan holds the steps in an order that runs each after those it waits for.
	for _, s := range compiled(f).Steps {
		fmt.Println(s.Name, s.After)
	}
	// Output:
	// split []
	// left [split]
	// right [split]
	// join [left right]
}

func ExampleForeach() {
	f := sdk.NewFlow("regions", sdk.Image(img)).
		Step("sync", sdk.Command("sh", "-c", "sync-region $MANIFOLD_ITEM"), sdk.Foreach("us-east-1", "eu-west-1"))
	p := compiled(f)
	s := p.Step("sync")
	for i, item := range s.Foreach {
		// Each target runs the step's pod once per item, with the item in its env.
		var env []string
		for _, e := range emit.Pod(p, s, emit.PodOptions{Item: &emit.Item{Index: strconv.Itoa(i), Value: item}}).Spec.Containers[0].Env {
			env = append(env, e.Name+"="+e.Value)
		}
		fmt.Println(strings.Join(env, " "))
	}
	// Output:
	// MANIFOLD_ITEM=us-east-1 MANIFOLD_INDEX=0
	// MANIFOLD_ITEM=eu-west-1 MANIFOLD_INDEX=1
}

func ExampleCPU() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.CPU("500m"))
	show(pod(f, "s").Containers[0].Resources)
	// Output:
	// requests:
	//   cpu: 500m
}

func ExampleMemory() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.Memory("16Gi"))
	show(pod(f, "s").Containers[0].Resources)
	// Output:
	// limits:
	//   memory: 16Gi
	// requests:
	//   memory: 16Gi
}

func ExampleDisk() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.Disk("100Gi"))
	show(pod(f, "s").Containers[0].Resources)
	// Output:
	// requests:
	//   ephemeral-storage: 100Gi
}

func ExampleSharedMemory() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.SharedMemory("64Gi"))
	spec := pod(f, "s")
	show(spec.Volumes)
	show(spec.Containers[0].VolumeMounts)
	// Output:
	// - emptyDir:
	//     medium: Memory
	//     sizeLimit: 64Gi
	//   name: dshm
	// - mountPath: /dev/shm
	//   name: dshm
}

func ExampleGPU() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.GPU(8)).
		Step("train", sdk.Command("torchrun", "train.py")).
		Step("report", sdk.Command("report"), sdk.After("train"), sdk.GPU(0)) // GPU(0): none
	for _, name := range []string{"train", "report"} {
		spec := pod(f, name)
		fmt.Println(name, spec.Containers[0].Resources.Limits.Name("nvidia.com/gpu", "DecimalSI"), len(spec.Tolerations), "toleration(s)")
	}
	// Output:
	// train 8 1 toleration(s)
	// report 0 0 toleration(s)
}

func ExampleGPUVendor() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("rocm-smi"), sdk.GPU(1), sdk.GPUVendor("amd"))
	spec := pod(f, "s")
	show(spec.Containers[0].Resources.Limits)
	show(spec.Tolerations)
	// Output:
	// amd.com/gpu: "1"
	// - effect: NoSchedule
	//   key: amd.com/gpu
	//   operator: Exists
}

func ExampleTrainium() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("train", sdk.Command("torchrun", "train.py"), sdk.Trainium(16))
	spec := pod(f, "train")
	show(spec.Containers[0].Resources)
	show(spec.Tolerations)
	// Output:
	// limits:
	//   aws.amazon.com/neuron: "16"
	// requests:
	//   aws.amazon.com/neuron: "16"
	// - effect: NoSchedule
	//   key: aws.amazon.com/neuron
	//   operator: Exists
}

// Trainium(0) on a step takes the flow's default away: the step asks no Neuron
// devices and tolerates no Neuron taint.
func ExampleTrainium_zero() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.Trainium(16)).
		Step("prep", sdk.Command("prep"), sdk.Trainium(0)).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.After("prep"))
	for _, name := range []string{"prep", "train"} {
		spec := pod(f, name)
		fmt.Println(name, spec.Containers[0].Resources.Limits.Name(plan.ResourceNeuron, "DecimalSI"), len(spec.Tolerations), "toleration(s)")
	}
	// Output:
	// prep 0 0 toleration(s)
	// train 16 1 toleration(s)
}

func ExampleInferentia() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.Trainium(16)).
		Step("serve", sdk.Command("serve"), sdk.InstanceType("inf2.xlarge"), sdk.Inferentia(1)) // replaces the flow's Trainium(16)
	show(pod(f, "serve").Containers[0].Resources.Limits)
	// Output:
	// aws.amazon.com/neuron: "1"
}

func ExampleEFA() {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8))
	show(pod(f, "train").Containers[0].Resources.Limits)
	// Output:
	// aws.amazon.com/neuron: "16"
	// vpc.amazonaws.com/efa: "8"
}

func ExampleEFAAll() {
	// The count is the instance type's, from the catalog; check and run --kube
	// ask the cluster's nodes.
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.InstanceType("p5.48xlarge"), sdk.GPU(8), sdk.EFAAll())
	show(pod(f, "train").Containers[0].Resources.Limits)
	// Output:
	// nvidia.com/gpu: "8"
	// vpc.amazonaws.com/efa: "32"
}

func ExampleEFAWiring() {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.GPU(8), sdk.EFA(4), sdk.EFAWiring())
	c := pod(f, "train").Containers[0]
	for _, e := range c.Env {
		fmt.Printf("%s=%s\n", e.Name, e.Value)
	}
	show(c.SecurityContext)
	// Output:
	// FI_PROVIDER=efa
	// FI_EFA_USE_DEVICE_RDMA=1
	// FI_EFA_FORK_SAFE=1
	// NCCL_SOCKET_IFNAME=^lo
	// NCCL_IGNORE_DISABLED_P2P=1
	// LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu:/opt/amazon/efa/lib:/opt/amazon/openmpi/lib:/usr/local/cuda/compat/lib:/usr/local/nvidia/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64
	// PATH=/opt/amazon/efa/bin:/opt/amazon/openmpi/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	// allowPrivilegeEscalation: false
	// capabilities:
	//   add:
	//   - IPC_LOCK
	//   drop:
	//   - ALL
}

func ExampleEFAArch() {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.GPU(1), sdk.EFA(1), sdk.EFAWiring(), sdk.EFAArch("arm64"))
	for _, e := range pod(f, "train").Containers[0].Env {
		if e.Name == "LD_LIBRARY_PATH" {
			fmt.Println(e.Value)
		}
	}
	// Output:
	// /opt/amazon/ofi-nccl/lib/aarch64-linux-gnu:/opt/amazon/efa/lib:/opt/amazon/openmpi/lib:/usr/local/cuda/compat/lib:/usr/local/nvidia/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64
}

func ExampleResource() {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("s", sdk.Command("synth"), sdk.Resource("example.com/fpga", 2))
	show(pod(f, "s").Containers[0].Resources)
	// Output:
	// limits:
	//   example.com/fpga: "2"
	// requests:
	//   example.com/fpga: "2"
}

func ExampleInstanceType() {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.InstanceType("trn1.32xlarge"), sdk.EFA(32))
	// trn1.32xlarge has 8 EFA interfaces: the compiler says so.
	compiled(f)
	f = sdk.NewFlow("f", sdk.Image(img)).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.InstanceType("trn1.32xlarge"), sdk.EFA(8))
	show(pod(f, "train").NodeSelector)
	// Output:
	// steps[train].efa: Invalid value: 32: trn1.32xlarge has at most 8 EFA interfaces
	// node.kubernetes.io/instance-type: trn1.32xlarge
}

func ExampleNodeSelector() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.NodeSelector("karpenter.sh/capacity-type", "spot")).
		Step("s", sdk.Command("true"), sdk.NodeSelector("karpenter.sh/capacity-type", "on-demand"))
	show(pod(f, "s").NodeSelector)
	// Output:
	// karpenter.sh/capacity-type: on-demand
}

func ExampleToleration() {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("s", sdk.Command("true"), sdk.Toleration("dedicated", "ml", "NoSchedule"), sdk.Toleration("spot", "", ""))
	show(pod(f, "s").Tolerations)
	// Output:
	// - effect: NoSchedule
	//   key: dedicated
	//   operator: Equal
	//   value: ml
	// - key: spot
	//   operator: Exists
}

func ExampleSameZone() {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.Nodes(2), sdk.SameZone())
	s := compiled(f).Step("train")
	fmt.Println("apart:", s.Apart, "together:", s.Together)
	// Output:
	// apart: kubernetes.io/hostname together: topology.kubernetes.io/zone
}

func ExampleAnyZone() {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.Nodes(2), sdk.EFA(1), sdk.AnyZone())
	s := compiled(f).Step("train")
	fmt.Printf("apart: %s, together: %q\n", s.Apart, s.Together)
	// Output:
	// apart: kubernetes.io/hostname, together: ""
}

func ExampleSpread() {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.Nodes(4), sdk.Spread("topology.k8s.aws/network-node-layer-3"))
	s := compiled(f).Step("train")
	fmt.Printf("apart: %s, together: %q\n", s.Apart, s.Together)
	// Output:
	// apart: topology.k8s.aws/network-node-layer-3, together: ""
}

func ExampleQueue() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("train", sdk.Command("torchrun", "train.py"), sdk.Queue("ml-team"))
	fmt.Println(compiled(f).Step("train").Queue)
	// Output:
	// ml-team
}

func ExamplePriority() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("train", sdk.Command("torchrun", "train.py"), sdk.Queue("ml-team"), sdk.Priority("high"))
	fmt.Println(pod(f, "train").PriorityClassName)
	// Output:
	// high
}

func ExampleTopology() {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.Nodes(4), sdk.Queue("ml-team"), sdk.Topology("cloud.provider.com/topology-block"))
	fmt.Println(compiled(f).Step("train").Topology)
	// Output:
	// cloud.provider.com/topology-block
}

func ExampleImage() {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("prepare", sdk.Command("prepare")).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.After("prepare"), sdk.Image("public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0"))
	for _, name := range []string{"prepare", "train"} {
		fmt.Println(name, pod(f, name).Containers[0].Image)
	}
	// Output:
	// prepare registry.example.com/ml/flow:v1
	// train public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0
}

func ExampleImagePullPolicy() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.ImagePullPolicy("IfNotPresent")).Step("s", sdk.Command("true"))
	fmt.Println(pod(f, "s").Containers[0].ImagePullPolicy)
	// Output:
	// IfNotPresent
}

func ExampleImagePullSecret() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.ImagePullSecret("ecr")).Step("s", sdk.Command("true"))
	show(pod(f, "s").ImagePullSecrets)
	// Output:
	// - name: ecr
}

func ExampleEnv() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.Env("LOG_LEVEL", "info")).
		Step("s", sdk.Command("true"), sdk.Env("LOG_LEVEL", "debug"), sdk.Env("HF_HOME", "/cache"))
	for _, e := range pod(f, "s").Containers[0].Env {
		fmt.Printf("%s=%s\n", e.Name, e.Value)
	}
	// Output:
	// LOG_LEVEL=debug
	// HF_HOME=/cache
}

func ExampleSecretEnv() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.SecretEnv("HF_TOKEN", "huggingface", "token"))
	show(pod(f, "s").Containers[0].Env)
	// Output:
	// - name: HF_TOKEN
	//   valueFrom:
	//     secretKeyRef:
	//       key: token
	//       name: huggingface
}

func ExampleSecret() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.Secret("wandb"))
	show(pod(f, "s").Containers[0].EnvFrom)
	// Output:
	// - secretRef:
	//     name: wandb
}

func ExampleLabel() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.Label("team", "ml")).Step("s", sdk.Command("true"))
	p := compiled(f)
	show(emit.Pod(p, p.Step("s"), emit.PodOptions{}).Labels)
	// Output:
	// app.kubernetes.io/name: f
	// app.kubernetes.io/part-of: manifold
	// manifold.dev/flow: f
	// manifold.dev/step: s
	// team: ml
}

func ExampleAnnotation() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.Annotation("example.com/owner", "ml@example.com"))
	p := compiled(f)
	show(emit.Pod(p, p.Step("s"), emit.PodOptions{}).Annotations)
	// Output:
	// example.com/owner: ml@example.com
}

func ExampleServiceAccount() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.ServiceAccount("trainer")).Step("s", sdk.Command("true"))
	fmt.Println(pod(f, "s").ServiceAccountName)
	// Output:
	// trainer
}

func ExampleNamespace() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.Namespace("ml")).Step("s", sdk.Command("true"))
	fmt.Println(compiled(f).Step("s").Namespace)
	// Output:
	// ml
}

func ExampleVolume() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.Volume("training-data", "/data"))
	spec := pod(f, "s")
	show(spec.Volumes)
	show(spec.Containers[0].VolumeMounts)
	// Output:
	// - name: pvc-0
	//   persistentVolumeClaim:
	//     claimName: training-data
	// - mountPath: /data
	//   name: pvc-0
}

func ExamplePort() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("train", sdk.Command("torchrun", "train.py"), sdk.Nodes(2), sdk.Port(29400))
	show(pod(f, "train").Containers[0].Ports)
	// Output:
	// - containerPort: 29400
	//   protocol: TCP
}

func ExampleNodes() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("train", sdk.Command("torchrun", "train.py"), sdk.Nodes(2))
	p := compiled(f)
	s := p.Step("train")
	fmt.Println(s.Nodes, "nodes")
	// Every node's pod finds rank 0 by the name its target gives it: here the
	// job target's Indexed Job and headless Service.
	for _, e := range emit.Pod(p, s, emit.PodOptions{MasterAddr: "f-train-0.f-train"}).Spec.Containers[0].Env {
		if e.Value != "" {
			fmt.Printf("%s=%s\n", e.Name, e.Value)
		} else {
			fmt.Printf("%s from %s\n", e.Name, e.ValueFrom.FieldRef.FieldPath)
		}
	}
	// Output:
	// 2 nodes
	// MANIFOLD_NODE_RANK from metadata.annotations['batch.kubernetes.io/job-completion-index']
	// MANIFOLD_NUM_NODES=2
	// MASTER_ADDR=f-train-0.f-train
	// MASTER_PORT=29500
	// PET_NNODES=2
	// PET_NODE_RANK from metadata.annotations['batch.kubernetes.io/job-completion-index']
	// PET_MASTER_ADDR=f-train-0.f-train
	// PET_MASTER_PORT=29500
}

func ExampleRunAsUser() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.RunAsUser(1000))
	show(pod(f, "s").SecurityContext)
	// Output:
	// runAsNonRoot: true
	// runAsUser: 1000
	// seccompProfile:
	//   type: RuntimeDefault
}

func ExampleRunAsNonRoot() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.RunAsNonRoot(true), sdk.RunAsUser(1000))
	show(pod(f, "s").SecurityContext)
	// Output:
	// runAsNonRoot: true
	// runAsUser: 1000
	// seccompProfile:
	//   type: RuntimeDefault
}

func ExampleHostNetwork() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.HostNetwork(true))
	spec := pod(f, "s")
	fmt.Println(spec.HostNetwork, spec.DNSPolicy)
	// Output:
	// true ClusterFirstWithHostNet
}

func ExampleRetry() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.Retry(3), sdk.RetryBackoff(time.Minute))
	s := compiled(f).Step("s")
	fmt.Printf("%d retries, %s apart\n", s.Retry, s.RetryBackoff)
	// Output:
	// 3 retries, 1m0s apart
}

func ExampleRetryBackoff() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.RetryBackoff(30*time.Second)).Step("s", sdk.Command("true"), sdk.Retry(2))
	fmt.Println(compiled(f).Step("s").RetryBackoff)
	// Output:
	// 30s
}

func ExampleTimeout() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"), sdk.Timeout(6*time.Hour))
	fmt.Println(compiled(f).Step("s").Timeout)
	// Output:
	// 6h0m0s
}

func ExampleParam() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.Param("epochs", "3"), sdk.Param("learning-rate", "0.1")).
		Step("s", sdk.Command("true"))
	for _, e := range pod(f, "s").Containers[0].Env {
		fmt.Printf("%s=%s\n", e.Name, e.Value)
	}
	// Output:
	// MANIFOLD_PARAM_EPOCHS=3
	// MANIFOLD_PARAM_LEARNING_RATE=0.1
}

func ExampleSchedule() {
	f := sdk.NewFlow("nightly", sdk.Image(img), sdk.Schedule("0 3 * * *")).Step("s", sdk.Command("true"))
	fmt.Println(compiled(f).Schedule)
	// Output:
	// 0 3 * * *
}

func ExampleArtifactVolume() {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.ArtifactVolume("flow-artifacts")).Step("s", sdk.Command("true"))
	fmt.Println(compiled(f).Artifacts.Claim)
	show(pod(f, "s").Containers[0].VolumeMounts)
	// Output:
	// flow-artifacts
	// - mountPath: /manifold/artifacts
	//   name: manifold-artifacts
}

func ExampleNoArtifacts() {
	// prepare puts what evaluate gets; report keeps nothing, and says so.
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("prepare", sdk.Run(func(ctx *sdk.Context) error { return ctx.Put("shards", 4) })).
		Step("evaluate", sdk.Run(func(ctx *sdk.Context) error { var n int; return ctx.Get("prepare", "shards", &n) }), sdk.After("prepare")).
		Step("report", sdk.Run(func(*sdk.Context) error { return nil }), sdk.After("evaluate"), sdk.NoArtifacts())
	for _, w := range compile.Lint(compiled(f)) {
		what, _, _ := strings.Cut(w.Detail, ":")
		fmt.Println(w.Field+":", what)
	}
	// Output:
	// artifacts: the flow has no artifact store, but its Run steps (steps[prepare], steps[evaluate]) keep or read artifacts
}

func ExampleDRA() {
	f := sdk.NewFlow("f", sdk.Image(img)).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.InstanceType("trn2.48xlarge"), sdk.Trainium(16), sdk.EFA(16), sdk.DRA())
	p := compiled(f)
	s := p.Step("train")
	show(emit.ClaimTemplate(p, s).Spec.Spec.Devices)
	show(emit.Pod(p, s, emit.PodOptions{}).Spec.ResourceClaims)
	// Output:
	// constraints:
	// - matchAttribute: resource.aws.com/devicegroup16_id
	//   requests:
	//   - neuron
	//   - efa
	// requests:
	// - exactly:
	//     allocationMode: ExactCount
	//     count: 16
	//     deviceClassName: neuron.aws.com
	//   name: neuron
	// - exactly:
	//     allocationMode: ExactCount
	//     count: 16
	//     deviceClassName: efa.networking.k8s.aws
	//   name: efa
	// - name: devices
	//   resourceClaimTemplateName: f-train
}

func ExampleClaim() {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("synth"), sdk.Claim("shared-fpga"))
	show(pod(f, "s").ResourceClaims)
	// Output:
	// - name: claim-0
	//   resourceClaimTemplateName: shared-fpga
}
