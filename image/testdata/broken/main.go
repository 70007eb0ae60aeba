// Command broken does not compile: the tests check that image build says so.
package main

func main() {
	var n int = "not a number"
	_ = n
}
