package main

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A unit test of Reconcile on controller-runtime's fake client: a new WebApp gets
// its finalizer, Deployment, Service and a Ready=False condition.
func TestReconcileCreates(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = addToScheme(scheme)
	app := &WebApp{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: WebAppSpec{Image: "nginx:1.27", Replicas: 2, Port: 8080}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(app).WithStatusSubresource(app).Build()
	r := &WebAppReconciler{Client: c, Recorder: record.NewFakeRecorder(10)}
	ctx := context.Background()
	key := types.NamespacedName{Name: "web", Namespace: "default"}

	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := c.Get(ctx, key, &dep); err != nil {
		t.Fatal(err)
	}
	if *dep.Spec.Replicas != 2 || dep.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" {
		t.Errorf("deployment: %+v", dep.Spec)
	}
	var svc corev1.Service
	if err := c.Get(ctx, key, &svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.IntValue() != 8080 {
		t.Errorf("service ports: %+v", svc.Spec.Ports)
	}
	var got WebApp
	if err := c.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) != 1 || !meta.IsStatusConditionFalse(got.Status.Conditions, "Ready") {
		t.Errorf("webapp: finalizers %v conditions %+v", got.Finalizers, got.Status.Conditions)
	}
}
