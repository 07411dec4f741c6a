// Prints the runes Go's strconv.IsPrint accepts, as "first last" ranges in hex, one per line,
// after a first line with the unicode package's version.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"unicode"
)

func main() {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	fmt.Fprintln(out, unicode.Version)
	start := -1
	for r := 0; r <= unicode.MaxRune+1; r++ {
		printable := r <= unicode.MaxRune && strconv.IsPrint(rune(r))
		if printable && start < 0 {
			start = r
		} else if !printable && start >= 0 {
			fmt.Fprintf(out, "%x %x\n", start, r-1)
			start = -1
		}
	}
}
