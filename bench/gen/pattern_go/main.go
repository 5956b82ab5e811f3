// The Go peer of bench/gen/pattern.c: the same patterns and strings through Go's
// regexp, the engine the API server checks a CRD's pattern with (and that
// client-go users would validate with). Patterns arrive one per line on stdin.
//
//	go run bench/gen/pattern_go/main.go ITERATIONS < patterns
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"time"
)

func subject(n int) string {
	b := make([]byte, n)
	for i := range b {
		if i%10 == 9 && i+1 < n {
			b[i] = '.'
		} else {
			b[i] = byte('a' + i%26)
		}
	}
	return string(b)
}

func main() {
	iters := 2000
	if len(os.Args) > 1 {
		iters, _ = strconv.Atoi(os.Args[1])
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		src := sc.Text()
		fmt.Printf("  %s\n", src)
		t0 := time.Now()
		re, err := regexp.Compile(src)
		d := time.Since(t0)
		if err != nil {
			fmt.Printf("    does not compile: %v\n", err)
			continue
		}
		fmt.Printf("    %-34s %9.1f us (Go regexp)\n", "compile", float64(d.Nanoseconds())/1e3)
		for _, n := range []int{16, 63, 253} {
			s := subject(n)
			m := 0
			t := time.Now()
			for i := 0; i < iters; i++ {
				if re.MatchString(s) {
					m++
				}
			}
			per := float64(time.Since(t).Nanoseconds()) / 1e3 / float64(iters)
			what, pad := "no match", 1
			if m > 0 {
				what, pad = "match", 4
			}
			fmt.Printf("    match %3d characters (%s)%*s %9.2f us (Go regexp)\n", n, what, pad, "", per)
		}
	}
}
