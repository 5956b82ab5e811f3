// Kubernetes' sample-controller written the controller-runtime way, as a peer in
// bench/bench_controller.sh: the same Foo -> nginx Deployment reconciliation as
// k8s.io/sample-controller's syncHandler, on a controller-runtime manager.
//
// Flags (Go's flag package, so -x and --x both work):
//
//	-kubeconfig PATH     (registered by controller-runtime; else $KUBECONFIG / in-cluster)
//	-namespace NS        the only namespace the cache watches (default: all)
//	-kube-api-qps N      client-side QPS of the rest config (0: client-go's default, 5)
//	-kube-api-burst N    client-side burst of the rest config (0: client-go's default, 10)
//	-v N and the other klog flags
//
// The manager runs with leader election off and no metrics or health probe server,
// like the other controllers in the benchmark. The cache resyncs every 30 s (the
// Go original's informer resync period) and the controller runs 2 workers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

const (
	// agentName is the Events' source component and the field manager of our writes,
	// the names the Go original uses.
	agentName = "sample-controller"

	reasonSynced         = "Synced"
	reasonResourceExists = "ErrResourceExists"
	msgSynced            = "Foo synced successfully"
	msgResourceExists    = "Resource %q already exists and is not managed by Foo"

	workers      = 2
	resyncPeriod = 30 * time.Second
)

// FooReconciler converges one Foo's Deployment and reports its available replicas.
type FooReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder record.EventRecorder
}

// Reconcile follows sample-controller's syncHandler step by step. The Gets are
// served by the manager's cache, as the Go original's listers are.
func (r *FooReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)

	var foo Foo
	if err := r.Get(ctx, req.NamespacedName, &foo); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted since it was queued: its Deployment goes with it (owner reference).
			log.V(4).Info("Foo no longer exists")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}

	name := foo.Spec.DeploymentName
	if name == "" {
		// Not retried: only a change to the Foo can mend it, and that queues it again.
		log.Error(nil, "Deployment name missing from object reference")
		return ctrl.Result{}, nil
	}

	var dep appsv1.Deployment
	err := r.Get(ctx, types.NamespacedName{Namespace: foo.Namespace, Name: name}, &dep)
	if apierrors.IsNotFound(err) {
		var want *appsv1.Deployment
		if want, err = r.newDeployment(&foo); err != nil {
			return ctrl.Result{}, err
		}
		err = r.Create(ctx, want, client.FieldOwner(agentName))
		dep = *want
	}
	if err != nil {
		return ctrl.Result{}, err
	}

	if !metav1.IsControlledBy(&dep, &foo) {
		msg := fmt.Sprintf(msgResourceExists, dep.Name)
		r.Recorder.Event(&foo, corev1.EventTypeWarning, reasonResourceExists, msg)
		return ctrl.Result{}, errors.New(msg)
	}

	if foo.Spec.Replicas != nil && (dep.Spec.Replicas == nil || *foo.Spec.Replicas != *dep.Spec.Replicas) {
		log.V(4).Info("Update deployment resource", "desiredReplicas", *foo.Spec.Replicas)
		// As the Go original: the whole Deployment is written afresh, without a
		// resourceVersion (an unconditional update).
		want, err := r.newDeployment(&foo)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Update(ctx, want, client.FieldOwner(agentName)); err != nil {
			return ctrl.Result{}, err
		}
		dep = *want
	}

	// The cache hands out deep copies, so foo is ours to change.
	foo.Status.AvailableReplicas = dep.Status.AvailableReplicas
	if err := r.Status().Update(ctx, &foo, client.FieldOwner(agentName)); err != nil {
		return ctrl.Result{}, err
	}

	r.Recorder.Event(&foo, corev1.EventTypeNormal, reasonSynced, msgSynced)
	return ctrl.Result{}, nil
}

// newDeployment is the Deployment a Foo asks for: nginx, labelled for the Foo,
// controlled by it.
func (r *FooReconciler) newDeployment(foo *Foo) (*appsv1.Deployment, error) {
	labels := map[string]string{"app": "nginx", "controller": foo.Name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: foo.Spec.DeploymentName, Namespace: foo.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: foo.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "nginx", Image: "nginx:latest"}},
				},
			},
		},
	}
	// controller=true, blockOwnerDeletion=true.
	if err := controllerutil.SetControllerReference(foo, dep, r.Scheme); err != nil {
		return nil, err
	}
	return dep, nil
}

func main() {
	var namespace string
	var qps float64
	var burst int
	flag.StringVar(&namespace, "namespace", "", "Only watch this namespace (default: all namespaces).")
	flag.Float64Var(&qps, "kube-api-qps", 0, "Client-side QPS limit (0: client-go's default).")
	flag.IntVar(&burst, "kube-api-burst", 0, "Client-side burst (0: client-go's default).")
	klog.InitFlags(nil)
	flag.Parse()
	ctrl.SetLogger(klog.NewKlogr())
	log := ctrl.Log.WithName("setup")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "Error building kubeconfig")
		os.Exit(1)
	}
	if qps != 0 {
		cfg.QPS = float32(qps)
	}
	if burst != 0 {
		cfg.Burst = burst
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		log.Error(err, "Error building the scheme")
		os.Exit(1)
	}
	if err := AddToScheme(scheme); err != nil {
		log.Error(err, "Error building the scheme")
		os.Exit(1)
	}

	sync := resyncPeriod
	cacheOpts := cache.Options{SyncPeriod: &sync}
	if namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
	})
	if err != nil {
		log.Error(err, "Error creating the manager")
		os.Exit(1)
	}

	r := &FooReconciler{
		Client: mgr.GetClient(),
		Scheme: mgr.GetScheme(),
		// The core/v1 Event recorder, as the Go original's; controller-runtime
		// deprecates it for the events.k8s.io one (GetEventRecorder).
		Recorder: mgr.GetEventRecorderFor(agentName), //nolint:staticcheck
	}
	err = ctrl.NewControllerManagedBy(mgr).
		// What kubebuilder users write on the primary: without it, the status
		// update every reconcile makes (a new resourceVersion) queues the Foo once
		// more, and at 1,000 Foos the peer wrote 3,000 times a minute at rest.
		// Resyncs of Foos are dropped by it too (same generation).
		For(&Foo{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A resync replays every Deployment unchanged; the Go original drops those
		// (same resourceVersion) and so does this predicate. Foos' resyncs do queue.
		Owns(&appsv1.Deployment{}, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
	if err != nil {
		log.Error(err, "Error creating the controller")
		os.Exit(1)
	}

	// The benchmark waits for "Started workers": logged once both informers are
	// synced, which is when the controller starts its workers too (it sees the
	// sync on its own 100 ms poll, so its "Starting workers" may come up to 0.1 s
	// later). The Go original polls the same way before its "Started workers".
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		c := mgr.GetCache()
		for _, obj := range []client.Object{&Foo{}, &appsv1.Deployment{}} {
			if _, err := c.GetInformer(ctx, obj); err != nil {
				return err
			}
		}
		if !c.WaitForCacheSync(ctx) {
			return errors.New("caches did not sync")
		}
		log.Info("Started workers", "count", workers)
		<-ctx.Done()
		return nil
	}))
	if err != nil {
		log.Error(err, "Error adding a runnable")
		os.Exit(1)
	}

	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "Error running the manager")
		os.Exit(1)
	}
}
