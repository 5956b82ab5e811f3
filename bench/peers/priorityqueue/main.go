// Benchmark of controller-runtime's priority queue (pkg/controller/priorityqueue)
// with the loop shapes and labels of the priority part of bench/bench_workqueue.c,
// so that bench/bench_workqueue.sh can print the two side by side. Prints figures;
// asserts nothing about speed. The plain-queue lines of that part come from the
// client-go peer (bench/peers/workqueue); this one prints the priority-queue lines.
//
// One goroutine: rounds of N adds of distinct keys ("default/foo-<i>", i < N) then N
// gets, each followed by Done; 2,000,000 keys in all (2,000,000 / N rounds), N = 1000
// and 50,000. Every add is AddWithOpts with a Priority pointer, one key per call, at
// a priority drawn before timing from {0}, {0, -100} (controller-runtime's own two:
// 0 and the low priority of initial-list and resync events) or {-100, -90, ..., 50}
// (16). Gets are GetWithPriority. The figure is (adds + gets) per second.
//
// What the queue does behind that API, as a user gets it: AddWithOpts appends to a
// buffer and wakes a goroutine that moves the buffer into a btree under the queue's
// lock; GetWithPriority registers as a waiter and blocks until a second goroutine
// (handleReadyItems) flushes the buffer, walks the btree from its first item and
// hands one over an unbuffered channel. So every Get is a hand-off between
// goroutines, which the C queue (a heap under a mutex, taken by the caller's thread)
// does not have.
//
// Metrics: New is called without WithMetricProvider, so its default provider is
// used (controller-runtime's Prometheus one, internal/metrics.WorkqueueMetricsProvider);
// the queue's name is empty, and with an empty name the queue keeps no metrics at
// all (newQueueMetrics returns noMetrics, and no unfinished-work goroutine runs).
// That matches the C side (an unnamed ck_wq_t: no metrics) and the client-go peer
// (Name ""), so no clock reads or histogram updates are timed on either side.
//
// Arguments as bench_workqueue.c's: none, or the parts to run; this peer has only
// "priority".
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

const total = 2000000

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// prioRate runs the loop above at one depth; allocs, when not nil, receives the
// number of heap allocations made inside the timed loop.
func prioRate(depth int, prios []int, allocs *uint64) float64 {
	k := make([]string, depth)
	p := make([]int, depth)
	for i := range k {
		k[i] = fmt.Sprintf("default/foo-%d", i)
		p[i] = prios[rand.IntN(len(prios))]
	}
	q := priorityqueue.New[string]("")
	defer q.ShutDown()
	rounds := total / depth
	// Checked, not timed apart: within a round every add comes before every get,
	// so priorities must come out never rising. One compare per get.
	rises := 0
	a0 := mallocs()
	t0 := time.Now()
	for r := 0; r < rounds; r++ {
		for i := 0; i < depth; i++ {
			q.AddWithOpts(priorityqueue.AddOpts{Priority: &p[i]}, k[i])
		}
		last := int(^uint(0) >> 1)
		for i := 0; i < depth; i++ {
			key, prio, _ := q.GetWithPriority()
			if prio > last {
				rises++
			}
			last = prio
			q.Done(key)
		}
	}
	d := time.Since(t0)
	if allocs != nil {
		*allocs = mallocs() - a0
	}
	if rises > 0 {
		fmt.Fprintf(os.Stderr, "priorityqueue bench: %d gets came out at a higher priority than the one before\n", rises)
	}
	return 2 * float64(rounds*depth) / d.Seconds()
}

func benchPriority() {
	one, two := []int{0}, []int{0, -100}
	sixteen := make([]int, 16)
	for i := range sixteen {
		sixteen[i] = i*10 - 100
	}
	var prioAllocs uint64
	for d, n := range []int{1000, 50000} {
		var a *uint64
		if d == 0 {
			a = &prioAllocs
		}
		fmt.Printf("priority queue, %5d queued, 1 prio:   %6.2f M adds+gets/s\n", n, prioRate(n, one, nil)/1e6)
		fmt.Printf("priority queue, %5d queued, 2 prios:  %6.2f M adds+gets/s\n", n, prioRate(n, two, a)/1e6)
		fmt.Printf("priority queue, %5d queued, 16 prios: %6.2f M adds+gets/s\n", n, prioRate(n, sixteen, nil)/1e6)
	}
	fmt.Printf("allocations per key, 1000 queued, priority: %6.3f\n", float64(prioAllocs)/total)
}

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
	fmt.Printf("controller-runtime priorityqueue benchmark (%d CPUs online, %s)\n", runtime.NumCPU(), runtime.Version())
	if wanted("priority") {
		benchPriority()
	}
}
