// Benchmark of client-go's workqueue with the loop shapes of bench/bench_workqueue.c,
// so that the two print comparable figures in one `make bench` run. Prints figures;
// asserts nothing about speed.
//
// The queue is client-go's typed queue of strings (what controllers use today:
// workqueue.NewTypedRateLimitingQueueWithConfig wraps it). AddAfter hands each key
// to the delaying queue's own goroutine through a channel of 1,000; the time per
// AddAfter is measured until that goroutine has taken every key (Len of the waiting
// heap is not exported, so the benchmark waits for the channel to drain by adding
// one key due now and getting it back).
//
// Arguments as bench_workqueue.c's: none (every part), or the parts to run among
// single, workers, after, memory and priority.
package main

import (
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

const nkeys = 4096

var keys [nkeys]string

func newQueue() workqueue.TypedInterface[string] {
	return workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: ""})
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

func benchSingle() {
	const n, warm = 2000000, 10000
	q := newQueue()
	for i := 0; i < warm; i++ {
		q.Add(keys[i%nkeys])
		k, _ := q.Get()
		q.Done(k)
	}
	a0 := mallocs()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		q.Add(keys[i%nkeys])
		k, _ := q.Get()
		q.Done(k)
	}
	d := time.Since(t0)
	allocs := mallocs() - a0
	fmt.Printf("add+get+done, 1 thread:              %7.1f ns/key   (%d keys)\n", float64(d.Nanoseconds())/n, n)
	fmt.Printf("allocations per add+get+done (warm): %7.4f        (%d in %d)\n", float64(allocs)/n, allocs, n)

	t0 = time.Now()
	for r := 0; r < n/1000; r++ {
		for i := 0; i < 1000; i++ {
			q.Add(keys[(r*1000+i)%nkeys])
		}
		for i := 0; i < 1000; i++ {
			k, _ := q.Get()
			q.Done(k)
		}
	}
	d = time.Since(t0)
	fmt.Printf("add+get+done, 1 thread, 1000 queued: %7.1f ns/key\n", float64(d.Nanoseconds())/n)
	q.ShutDown()
}

func benchWorkers(nworkers int) {
	const n = 400000
	// Every worker adds its own keys and takes whatever is queued. client-go's Add
	// does not say whether the key was new, so a worker takes a key only after an
	// add made the queue non-empty for it: Len() > 0 (an ignored add, the key being
	// dirty while another worker holds it, is possible with 2 cores).
	q := newQueue()
	var wg sync.WaitGroup
	got := make([]int, nworkers)
	first := make(chan struct{}, nworkers)
	t0 := time.Now()
	per := nkeys / nworkers
	for w := 0; w < nworkers; w++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			defer func() { first <- struct{}{} }()
			for i := 0; i < n/nworkers; i++ {
				q.Add(keys[id*per+i%per])
				if q.Len() == 0 {
					continue
				}
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				got[id]++
				q.Done(k)
			}
		}(w)
	}
	// A worker may wait in Get for a key another worker took: shut down once the
	// first has finished its share, as the C benchmark does (the others then stop).
	<-first
	q.ShutDown()
	wg.Wait()
	d := time.Since(t0)
	total := 0
	for _, g := range got {
		total += g
	}
	fmt.Printf("add+get+done, %d workers (each adds): %6.1f ns/key   (%d keys)\n", nworkers, float64(d.Nanoseconds())/float64(total), total)

	// One producer (the informer's handler), nworkers consumers.
	q = newQueue()
	processed := make([]int, nworkers)
	for w := 0; w < nworkers; w++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				processed[id]++
				q.Done(k)
			}
		}(w)
	}
	t0 = time.Now()
	for i := 0; i < n; i++ {
		q.Add(keys[i%nkeys])
	}
	q.ShutDownWithDrain()
	wg.Wait()
	d = time.Since(t0)
	total = 0
	for _, p := range processed {
		total += p
	}
	fmt.Printf("1 producer -> %d workers:             %6.1f ns/add  (%d adds, %d processed)\n", nworkers, float64(d.Nanoseconds())/n, n, total)
	fmt.Printf("1 producer -> %d workers, per get:    %6.1f ns/key  (adds of a queued key are merged)\n", nworkers, float64(d.Nanoseconds())/float64(total))
}

// drained returns once the delaying queue's goroutine has taken every AddAfter
// sent before it: a key due at once comes out of Get only after those.
func drained(q workqueue.TypedDelayingInterface[string]) {
	q.AddAfter("drain-marker", 0)
	for {
		k, _ := q.Get()
		q.Done(k)
		if k == "drain-marker" {
			return
		}
	}
}

func benchAddAfter() {
	const pending, m = 100000, 100000
	q := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: ""})
	defer q.ShutDown()
	hour := time.Hour
	for i := 0; i < pending; i++ {
		q.AddAfter(fmt.Sprintf("default/pending-%d", i), hour+time.Duration(rand.Int63n(int64(time.Second))))
	}
	drained(q)
	fresh := make([]string, m)
	jitter := make([]time.Duration, m)
	for i := range fresh {
		fresh[i] = fmt.Sprintf("default/fresh-%d", i)
		jitter[i] = time.Duration(rand.Int63n(int64(time.Second)))
	}
	t0 := time.Now()
	for i := 0; i < m; i++ {
		q.AddAfter(fresh[i], hour+jitter[i])
	}
	drained(q)
	fmt.Printf("add_after new key, %d..%d pending: %6.1f ns/op\n", pending, pending+m, float64(time.Since(t0).Nanoseconds())/m)
	t0 = time.Now()
	for i := 0; i < m; i++ {
		q.AddAfter(fresh[i], hour/2+jitter[i])
	}
	drained(q)
	fmt.Printf("add_after pending key, earlier time: %6.1f ns/op\n", float64(time.Since(t0).Nanoseconds())/m)
	t0 = time.Now()
	for i := 0; i < m; i++ {
		q.AddAfter(fresh[i], 2*hour)
	}
	drained(q)
	fmt.Printf("add_after pending key, later time:   %6.1f ns/op\n", float64(time.Since(t0).Nanoseconds())/m)
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func benchMemory() {
	const n = 100000
	// The key strings are made inside the measured window: a controller's key function
	// makes each key as it enqueues it and the queue keeps it alive, so it is memory
	// per queued key. The C queue copies each key; the copy is counted there.
	names := make([]string, n)
	before := heapAlloc()
	q := newQueue()
	for i := range names {
		names[i] = fmt.Sprintf("default/example-foo-%06d", i)
		q.Add(names[i])
	}
	after := heapAlloc()
	fmt.Printf("memory per queued  key (%d-byte keys):  %6.1f bytes   (%d keys)\n", len(names[0]), float64(after-before)/n, n)
	runtime.KeepAlive(q)
	q.ShutDown()

	names = make([]string, n)
	dq := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: ""})
	before = heapAlloc()
	for i := range names {
		names[i] = fmt.Sprintf("default/example-foo-%06d", i)
		dq.AddAfter(names[i], time.Hour)
	}
	drained(dq)
	after = heapAlloc()
	fmt.Printf("memory per delayed key (%d-byte keys):  %6.1f bytes   (%d keys)\n", len(names[0]), float64(after-before)/n, n)
	runtime.KeepAlive(dq)
	dq.ShutDown()
}

// plainRate is bench_workqueue.c's prio_rate for the plain queue: one goroutine,
// rounds of depth adds of distinct keys then depth get+done, 2,000,000 keys in all;
// returns (adds + gets) per second. allocs, when not nil, receives the heap
// allocations made inside the timed loop. client-go has no priority queue:
// controller-runtime's is timed with the same loop in bench/peers/priorityqueue.
func plainRate(depth int, allocs *uint64) float64 {
	const total = 2000000
	k := make([]string, depth)
	for i := range k {
		k[i] = fmt.Sprintf("default/foo-%d", i)
	}
	q := newQueue()
	defer q.ShutDown()
	rounds := total / depth
	a0 := mallocs()
	t0 := time.Now()
	for r := 0; r < rounds; r++ {
		for i := 0; i < depth; i++ {
			q.Add(k[i])
		}
		for i := 0; i < depth; i++ {
			key, _ := q.Get()
			q.Done(key)
		}
	}
	d := time.Since(t0)
	if allocs != nil {
		*allocs = mallocs() - a0
	}
	return 2 * float64(rounds*depth) / d.Seconds()
}

func benchPriority() {
	var plainAllocs uint64
	for d, n := range []int{1000, 50000} {
		var a *uint64
		if d == 0 {
			a = &plainAllocs
		}
		fmt.Printf("plain queue, %5d queued:              %6.2f M adds+gets/s\n", n, plainRate(n, a)/1e6)
	}
	fmt.Printf("allocations per key, 1000 queued, plain:    %6.3f\n", float64(plainAllocs)/2000000.0)
}

// wanted: the parts named on the command line, as bench_workqueue.c's (none: all).
func wanted(part string) bool {
	if len(os.Args) < 2 {
		return true
	}
	for _, a := range os.Args[1:] {
		if a == part {
			return true
		}
	}
	return false
}

func main() {
	for i := range keys {
		keys[i] = fmt.Sprintf("default/foo-%d", i)
	}
	fmt.Printf("client-go workqueue benchmark (%d CPUs online, %s)\n", runtime.NumCPU(), runtime.Version())
	if wanted("single") {
		benchSingle()
	}
	if wanted("workers") {
		benchWorkers(2)
		benchWorkers(8)
	}
	if wanted("after") {
		benchAddAfter()
	}
	if wanted("memory") {
		benchMemory()
	}
	if wanted("priority") {
		benchPriority()
	}
}
