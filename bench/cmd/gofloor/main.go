// Command gofloor does nothing. benchrelay spawns it, built like the
// release, to measure what starting any static Go binary costs on the
// machine: the floor under every Go peer's cold start.
package main

func main() {}
