// The oracle for tests/re2/run.sh: Go's regexp, which the API server checks a
// CRD's pattern with. It writes random patterns, built from the pieces ckube-gen
// translates, and random strings, with whether Go matches each, one line per
// pair: "x<pattern hex> x<string hex> <0|1>". Patterns Go refuses are left out (the
// API server refuses a CRD with one). Deterministic for a seed.
//
//	go run tests/re2/oracle.go SEED PATTERNS STRINGS
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"strconv"
)

// Pieces of patterns: atoms, classes, escapes, groups, flags, quantifiers.
var atoms = []string{
	"a", "b", "k", "s", "A", "K", "S", "z", "_", "-", "1", " ", "é", "€", ".",
	`\d`, `\D`, `\w`, `\W`, `\s`, `\S`, `\.`, `\-`, `\t`, `\n`,
	"[ab]", "[^ab]", "[a-k]", "[^k]", "[k-s]", `[\w-]`, `[\d.]`, "[-a]", `[\s]`,
	"[A-Z]", "[^a-z]", `[\]a]`, "[_s]",
}
var quants = []string{"", "", "", "*", "+", "?", "{2}", "{1,3}", "{0,2}", "*?", "+?"}
var opens = []string{"(", "(?:", "(?i:", "(?s:", "(?-i:", "(?i-s:"}
var flags = []string{"(?i)", "(?s)", "(?U)", "(?-i)", "(?is)"}

// Pieces of strings: ASCII letters and digits, the letters Go folds to
// non-ASCII ones and those, a newline, multi-byte characters.
var chars = []string{"a", "b", "k", "s", "A", "B", "K", "S", "z", "Z", "_", "-", "1",
	" ", "\n", "\t", "\v", "\u00a0", ".", "é", "É", "€", "K", "ſ", "😀", "]"}

func pattern(r *rand.Rand, depth int) string {
	s := ""
	n := 1 + r.Intn(4)
	for i := 0; i < n; i++ {
		switch x := r.Intn(10); {
		case x == 0 && depth < 2:
			s += opens[r.Intn(len(opens))] + pattern(r, depth+1) + ")" + quants[r.Intn(len(quants))]
		case x == 1:
			s += flags[r.Intn(len(flags))]
		case x == 2 && i > 0:
			s += "|"
		default:
			s += atoms[r.Intn(len(atoms))] + quants[r.Intn(len(quants))]
		}
	}
	return s
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: oracle SEED PATTERNS STRINGS")
		os.Exit(2)
	}
	seed, _ := strconv.ParseInt(os.Args[1], 10, 64)
	np, _ := strconv.Atoi(os.Args[2])
	ns, _ := strconv.Atoi(os.Args[3])
	r := rand.New(rand.NewSource(seed))
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for p := 0; p < np; p++ {
		src := pattern(r, 0)
		if r.Intn(2) == 0 {
			src = "^" + src + "$"
		}
		re, err := regexp.Compile(src)
		if err != nil {
			continue
		}
		for i := 0; i < ns; i++ {
			str := ""
			for n := r.Intn(6); n > 0; n-- {
				str += chars[r.Intn(len(chars))]
			}
			m := 0
			if re.MatchString(str) {
				m = 1
			}
			fmt.Fprintf(w, "x%s x%s %d\n", hex.EncodeToString([]byte(src)),
				hex.EncodeToString([]byte(str)), m)
		}
	}
}
