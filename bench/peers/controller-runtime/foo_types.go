package main

// The Foo API (samplecontroller.k8s.io/v1alpha1), written by hand instead of with
// controller-gen: the two types, their DeepCopy methods and the scheme registration.
// The schema is deploy/crd.yaml. Like k8s.io/sample-controller's own types, only
// spec.deploymentName, spec.replicas and status.availableReplicas are modelled: a
// status update replaces the status with availableReplicas alone, as the Go original
// does (status.conditions and observedGeneration are the C daemon's additions).

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion of the Foo API.
var GroupVersion = schema.GroupVersion{Group: "samplecontroller.k8s.io", Version: "v1alpha1"}

// FooSpec is what the user asks for: a Deployment of that name with that many replicas.
type FooSpec struct {
	DeploymentName string `json:"deploymentName"`
	Replicas       *int32 `json:"replicas"`
}

// FooStatus is what the controller reports back.
type FooStatus struct {
	AvailableReplicas int32 `json:"availableReplicas"`
}

// Foo is a namespaced custom resource (plural foos).
type Foo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FooSpec   `json:"spec"`
	Status FooStatus `json:"status"`
}

// FooList is the list type the cache's List/Watch decodes.
type FooList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Foo `json:"items"`
}

// DeepCopyInto copies the spec, including the replicas pointee.
func (in *FooSpec) DeepCopyInto(out *FooSpec) {
	*out = *in
	if in.Replicas != nil {
		r := *in.Replicas
		out.Replicas = &r
	}
}

// DeepCopyInto copies the receiver into out.
func (in *Foo) DeepCopyInto(out *Foo) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	out.Status = in.Status
}

// DeepCopy returns a new Foo equal to the receiver.
func (in *Foo) DeepCopy() *Foo {
	if in == nil {
		return nil
	}
	out := new(Foo)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Foo) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies the receiver into out, item by item.
func (in *FooList) DeepCopyInto(out *FooList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Foo, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a new FooList equal to the receiver.
func (in *FooList) DeepCopy() *FooList {
	if in == nil {
		return nil
	}
	out := new(FooList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *FooList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// AddToScheme registers Foo and FooList under GroupVersion.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Foo{}, &FooList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
