package simcluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/catalog"
)

// The DRA drivers the simulated cluster imitates: the Neuron driver and DRANET,
// the EFA driver, with the DeviceClasses they install.
const (
	DriverNeuron      = "neuron.aws.com"
	DriverEFA         = "dra.net"
	DeviceClassNeuron = "neuron.aws.com"
	DeviceClassEFA    = "efa.networking.k8s.aws"
)

// DeviceGroupAttribute is the attribute both drivers give the devices of one
// group of size Neuron devices and the EFA interfaces beside them.
func DeviceGroupAttribute(size int) resourcev1.QualifiedName {
	return resourcev1.QualifiedName("resource.aws.com/devicegroup" + strconv.Itoa(size) + "_id")
}

// DeviceGroupSizes are the group sizes the drivers publish.
var DeviceGroupSizes = []int{1, 4, 8, 16}

// InstallNeuronDRA makes the simulated cluster's nodes of instance type t
// publish their Neuron devices and EFA interfaces as the Neuron and EFA DRA
// drivers do: the two DeviceClasses, and per node a ResourceSlice of each driver
// whose devices (neurondevice<i>, efa<j>) carry the devicegroup attributes. EFA
// interface j sits beside Neuron device j·devices/EFA, so a group of N Neuron
// devices holds N·EFA/devices interfaces. Objects that exist are left as they
// are, so tests of one cluster can each call it.
func (c *Cluster) InstallNeuronDRA(ctx context.Context, t string) error {
	inst, ok := catalog.Lookup(t)
	if !ok || inst.NeuronDevices() == 0 || inst.EFA == 0 {
		return fmt.Errorf("instance type %s has no Neuron devices and EFA interfaces to publish", t)
	}
	for class, driver := range map[string]string{DeviceClassNeuron: DriverNeuron, DeviceClassEFA: DriverEFA} {
		dc := &resourcev1.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: class},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
				CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
			}}},
		}
		if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create DeviceClass %s: %w", class, err)
		}
	}
	devices := inst.NeuronDevices()
	groups := func(node string, device int) map[resourcev1.QualifiedName]resourcev1.DeviceAttribute {
		attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}
		for _, size := range DeviceGroupSizes {
			attrs[DeviceGroupAttribute(size)] = resourcev1.DeviceAttribute{StringValue: new(fmt.Sprintf("%s-g%d-%d", node, size, device/size))}
		}
		return attrs
	}
	for i := 0; ; i++ {
		node := NodeName(t, i)
		if !slices.Contains(c.Nodes, node) {
			break
		}
		var neuron, efa []resourcev1.Device
		for d := range devices {
			attrs := groups(node, d)
			attrs["deviceId"] = resourcev1.DeviceAttribute{IntValue: new(int64(d))}
			attrs["instanceType"] = resourcev1.DeviceAttribute{StringValue: new(t)}
			neuron = append(neuron, resourcev1.Device{Name: "neurondevice" + strconv.Itoa(d), Attributes: attrs})
		}
		for j := range inst.EFA {
			attrs := groups(node, j*devices/inst.EFA)
			attrs["dra.net/rdma"] = resourcev1.DeviceAttribute{BoolValue: new(true)}
			attrs["dra.net/pciDevice"] = resourcev1.DeviceAttribute{StringValue: new("Elastic Fabric Adapter (EFA)")}
			efa = append(efa, resourcev1.Device{Name: "efa" + strconv.Itoa(j), Attributes: attrs})
		}
		for driver, devs := range map[string][]resourcev1.Device{DriverNeuron: neuron, DriverEFA: efa} {
			sl := &resourcev1.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
				Spec: resourcev1.ResourceSliceSpec{
					Driver:   driver,
					NodeName: new(node),
					Pool:     resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
					Devices:  devs,
				},
			}
			if _, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, sl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create ResourceSlice %s: %w", sl.Name, err)
			}
		}
	}
	return nil
}
