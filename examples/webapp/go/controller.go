package main

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

const finalizer = "example.ckube.io/webapp"

// WebAppReconciler keeps each WebApp's Deployment and Service as its spec says,
// reports readiness, and records an event when a WebApp goes.
type WebAppReconciler struct {
	client.Client
	Recorder record.EventRecorder
}

func (r *WebAppReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var app WebApp
	if err := r.Get(ctx, req.NamespacedName, &app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !app.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(&app, finalizer) {
			r.Recorder.Event(&app, corev1.EventTypeNormal, "Deleted", "WebApp deleted; its Deployment and Service go with it")
			controllerutil.RemoveFinalizer(&app, finalizer)
			return ctrl.Result{}, r.Update(ctx, &app)
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(&app, finalizer) {
		if err := r.Update(ctx, &app); err != nil {
			return ctrl.Result{}, err
		}
	}

	labels := map[string]string{"app.kubernetes.io/name": app.Name}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app.Name, Namespace: app.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		dep.Spec.Replicas = &app.Spec.Replicas
		dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		dep.Spec.Template.Labels = labels
		dep.Spec.Template.Spec.Containers = []corev1.Container{{
			Name:  "web",
			Image: app.Spec.Image,
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: app.Spec.Port}},
		}}
		return controllerutil.SetControllerReference(&app, dep, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: app.Name, Namespace: app.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
		svc.Spec.Selector = labels
		svc.Spec.Ports = []corev1.ServicePort{{
			Name:       "http",
			Port:       80,
			TargetPort: intstr.FromInt32(app.Spec.Port),
		}}
		return controllerutil.SetControllerReference(&app, svc, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}

	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing",
		Message: "waiting for pods", ObservedGeneration: app.Generation}
	if dep.Status.ReadyReplicas == app.Spec.Replicas {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, "Available", "all pods ready"
	}
	before := app.Status.DeepCopy()
	app.Status.ReadyReplicas = dep.Status.ReadyReplicas
	app.Status.ObservedGeneration = app.Generation
	meta.SetStatusCondition(&app.Status.Conditions, ready)
	if equalStatus(before, &app.Status) {
		return ctrl.Result{}, nil
	}
	err := r.Status().Update(ctx, &app)
	if apierrors.IsConflict(err) {
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{}, err
}

func equalStatus(a, b *WebAppStatus) bool {
	if a.ReadyReplicas != b.ReadyReplicas || a.ObservedGeneration != b.ObservedGeneration ||
		len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		if a.Conditions[i] != b.Conditions[i] {
			return false
		}
	}
	return true
}

func (r *WebAppReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&WebApp{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Complete(r)
}
