// Command configmap-hash annotates labelled ConfigMaps with a hash of their
// data and of the data of the Secret they name, so that workloads can roll
// when either changes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash"
	"hash/fnv"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

const (
	controllerAgentName = "configmap-hash"
	hashLabel           = "example.ckube.io/hash"
	hashAnnotation      = "example.ckube.io/hash"
	secretAnnotation    = "example.ckube.io/secret"
)

// Controller keeps the hash annotation of managed ConfigMaps up to date.
type Controller struct {
	client           kubernetes.Interface
	configMapsLister corelisters.ConfigMapLister
	configMapsSynced cache.InformerSynced
	secretsLister    corelisters.SecretLister
	secretsSynced    cache.InformerSynced
	queue            workqueue.TypedRateLimitingInterface[cache.ObjectName]
	recorder         record.EventRecorder
}

// NewController returns a configmap-hash controller watching the given informers.
func NewController(ctx context.Context, client kubernetes.Interface,
	configMapInformer coreinformers.ConfigMapInformer,
	secretInformer coreinformers.SecretInformer) *Controller {
	eventBroadcaster := record.NewBroadcaster(record.WithContext(ctx))
	eventBroadcaster.StartStructuredLogging(0)
	eventBroadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})

	c := &Controller{
		client:           client,
		configMapsLister: configMapInformer.Lister(),
		configMapsSynced: configMapInformer.Informer().HasSynced,
		secretsLister:    secretInformer.Lister(),
		secretsSynced:    secretInformer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "ConfigMaps"}),
		recorder: eventBroadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: controllerAgentName}),
	}

	configMapInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueConfigMap,
		UpdateFunc: func(old, new interface{}) { c.enqueueConfigMap(new) },
	})
	secretInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.handleSecret,
		UpdateFunc: func(old, new interface{}) { c.handleSecret(new) },
		DeleteFunc: c.handleSecret,
	})
	return c
}

// Run waits for the caches, then processes the queue with the given number of
// workers until ctx is cancelled, and returns once every worker has stopped.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	logger := klog.FromContext(ctx)

	logger.Info("Waiting for informer caches to sync")
	if !cache.WaitForCacheSync(ctx.Done(), c.configMapsSynced, c.secretsSynced) {
		return fmt.Errorf("failed to wait for caches to sync")
	}

	logger.Info("Starting workers", "count", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	<-ctx.Done()
	logger.Info("Shutting down workers")
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	objRef, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(objRef)

	if err := c.syncHandler(ctx, objRef); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Error syncing; requeuing for later retry", "objectReference", objRef)
		c.queue.AddRateLimited(objRef)
		return true
	}
	c.queue.Forget(objRef)
	return true
}

func (c *Controller) syncHandler(ctx context.Context, objRef cache.ObjectName) error {
	cm, err := c.configMapsLister.ConfigMaps(objRef.Namespace).Get(objRef.Name)
	if errors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if cm.Labels[hashLabel] != "true" {
		return nil
	}

	sum, err := c.computeHash(cm)
	if err != nil {
		return err
	}
	if cm.Annotations[hashAnnotation] == sum {
		return nil
	}

	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{hashAnnotation: sum}},
	})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().ConfigMaps(cm.Namespace).Patch(ctx, cm.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Updated hash", "configMap", klog.KObj(cm), "hash", sum)
	c.recorder.Eventf(cm, corev1.EventTypeNormal, "HashUpdated", "hash is now %s", sum)
	return nil
}

// computeHash returns the FNV-1a hash of the ConfigMap's data followed by the
// data of the Secret named by its secret annotation, if that Secret exists.
func (c *Controller) computeHash(cm *corev1.ConfigMap) (string, error) {
	h := fnv.New64a()
	writeData(h, cm.Data)
	if name := cm.Annotations[secretAnnotation]; name != "" {
		secret, err := c.secretsLister.Secrets(cm.Namespace).Get(name)
		switch {
		case err == nil:
			writeData(h, secret.Data)
		case !errors.IsNotFound(err):
			return "", err
		}
	}
	return fmt.Sprintf("fnv64a:%016x", h.Sum64()), nil
}

// writeData writes each key and value, in key order, each followed by a 0 byte.
func writeData[V string | []byte](h hash.Hash64, data map[string]V) {
	for _, k := range slices.Sorted(maps.Keys(data)) {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(data[k]))
		h.Write([]byte{0})
	}
}

func (c *Controller) enqueueConfigMap(obj interface{}) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Labels[hashLabel] != "true" {
		return
	}
	c.queue.Add(cache.MetaObjectToName(cm))
}

// handleSecret enqueues every managed ConfigMap that names the Secret.
func (c *Controller) handleSecret(obj interface{}) {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("error decoding object, invalid type %T", obj))
			return
		}
		secret, ok = tombstone.Obj.(*corev1.Secret)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("error decoding object tombstone, invalid type %T", tombstone.Obj))
			return
		}
	}
	cms, err := c.configMapsLister.ConfigMaps(secret.Namespace).List(labels.SelectorFromSet(labels.Set{hashLabel: "true"}))
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, cm := range cms {
		if cm.Annotations[secretAnnotation] == secret.Name {
			c.queue.Add(cache.MetaObjectToName(cm))
		}
	}
}

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "Path to a kubeconfig. Only required if out-of-cluster.")
	namespace := flag.String("namespace", "", "Namespace to watch; all namespaces if empty.")
	workers := flag.Int("workers", 2, "Number of workers.")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.FromContext(ctx)

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		logger.Error(err, "Error building kubeconfig")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		logger.Error(err, "Error building kubernetes clientset")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}

	factory := informers.NewSharedInformerFactoryWithOptions(client, 30*time.Second, informers.WithNamespace(*namespace))
	controller := NewController(ctx, client, factory.Core().V1().ConfigMaps(), factory.Core().V1().Secrets())
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	if err := controller.Run(ctx, *workers); err != nil {
		logger.Error(err, "Error running controller")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}
