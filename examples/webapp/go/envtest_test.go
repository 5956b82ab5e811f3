package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The controller on a manager against envtest (etcd + kube-apiserver from
// KUBEBUILDER_ASSETS): a WebApp gets its Deployment.
func TestEnvtest(t *testing.T) {
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "crd.yaml")}}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = addToScheme(scheme)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	r := &WebAppReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("webapp")}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()

	c, _ := client.New(cfg, client.Options{Scheme: scheme})
	app := &WebApp{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: WebAppSpec{Image: "nginx:1.27", Replicas: 1, Port: 8080}}
	if err := c.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c.Get(ctx, types.NamespacedName{Name: "web", Namespace: "default"}, &dep) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no Deployment within 30 s")
		}
	}
}
