// Command tiny is what TestMainRemovesTheBuiltBinaries builds in place of meshgw: a binary
// that links in a moment.
package main

func main() {}
