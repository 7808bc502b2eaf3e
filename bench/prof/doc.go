// Package prof holds go test -bench harnesses that take nacos-lockd apart
// for profiling: the replicated table alone (replica.Node over
// badger, no gRPC), raw dragonboat with a no-op state machine, and the
// table's apply path alone. They run on the real disk in a temporary
// directory. Compare figures only within one run (benchstat -A/B, or the
// ratios they print); the machine is shared.
//
//	go test -run '^$' -bench . -benchtime 3s ./bench/prof/
//	go test -run '^$' -bench 'Node/c=64' -cpuprofile cpu.out ./bench/prof/
package prof
