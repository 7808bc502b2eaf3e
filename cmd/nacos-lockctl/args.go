package main

import (
	"errors"
	"flag"
	"strings"
)

// Flags go anywhere on the command line, as with etcdctl and kubectl:
// `nacos-lockctl --json ls`, `nacos-lockctl ls --json`,
// `nacos-lockctl hold --lease 3000 job1 -- ./job.sh` and
// `nacos-lockctl --lease 3000 hold job1 -- ./job.sh` mean the same. Go's
// flag package stops at the first argument that is not a flag, so the
// arguments are rearranged first: global flags are taken out wherever they
// are, the command word is found, and each command parses its own flags
// interleaved with its positional arguments. Everything after the first
// "--" is left alone: it is hold's command line (whose own flags, even a
// --json, are not ours), or for the other commands positional arguments
// that may start with "-" (a key such as "-x").

// globalFlags are the flags of run's own FlagSet, which every command
// accepts; the value is true for a boolean flag.
var globalFlags = map[string]bool{"server": false, "json": true, "timeout": false, "token": false}

// commandBoolFlags are the boolean flags of the commands: needed to tell,
// before the command is known, whether the word after a flag is its value
// (`--owner try`) or the command (`--stale ls`). TestBoolFlagsKnown keeps
// the list in step with the commands' FlagSets.
var commandBoolFlags = map[string]bool{"stale": true, "password-stdin": true, "h": true, "help": true}

// flagName is the name of a flag argument ("--lease=5" -> "lease", true),
// and whether the argument carries its value after "=".
func flagName(arg string) (name string, hasValue bool, ok bool) {
	if len(arg) < 2 || arg[0] != '-' || arg == "--" {
		return "", false, false
	}
	name = strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		return name[:i], true, true
	}
	return name, false, true
}

// splitArgs takes run's arguments apart: the global flags (for run's
// FlagSet), the command word ("" if none), the command's own arguments
// (flags that came before the command moved behind it, then "--" and what
// followed it, unchanged).
func splitArgs(args []string) (global []string, command string, rest []string) {
	head, tail := args, []string(nil)
	for i, a := range args {
		if a == "--" {
			head, tail = args[:i], args[i:]
			break
		}
	}
	var others []string
	for i := 0; i < len(head); i++ {
		name, hasValue, isFlag := flagName(head[i])
		boolean, global_ := globalFlags[name]
		switch {
		case isFlag && global_:
			global = append(global, head[i])
			if !boolean && !hasValue && i+1 < len(head) {
				i++
				global = append(global, head[i])
			}
		default:
			others = append(others, head[i])
		}
	}
	at := -1
	for i := 0; i < len(others); i++ {
		name, hasValue, isFlag := flagName(others[i])
		if isFlag {
			if !hasValue && !commandBoolFlags[name] {
				i++ // its value, whatever it looks like
			}
			continue
		}
		at = i
		break
	}
	if at < 0 {
		return global, "", append(others, tail...)
	}
	rest = append(append(append([]string{}, others[at+1:]...), others[:at]...), tail...)
	return global, others[at], rest
}

// parseInterleaved parses fs's flags wherever they are among args and
// returns the positional arguments in order. after is what followed the
// first "--", untouched; dash reports whether there was one.
func parseInterleaved(fs *flag.FlagSet, args []string) (positional, after []string, dash bool, err error) {
	for i, a := range args {
		if a == "--" {
			args, after, dash = args[:i], args[i+1:], true
			break
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, false, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, after, dash, nil
		}
		positional, args = append(positional, args[0]), args[1:]
	}
}

// errNoCommand: the command line named no command.
var errNoCommand = errors.New("unknown command")
