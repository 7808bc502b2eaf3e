package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"nacos-lockd/compat"
	"nacos-lockd/gateway/auth"
)

const userUsage = `usage: nacos-lockd user <command> [flags] <username>

commands:
  add <name> [--admin]        create a user; the password is read from stdin
  passwd <name>               set a new password, read from stdin
  grant <name> <pattern> <r|w|rw>
                              allow the user the action on lock keys matching pattern (* = anything)
  remove <name>               delete a user (their tokens stop working)
  list                        users, whether admin, and their permissions

flags (before the command's arguments):
  --users-file F   the users file (default: nacos.lock.auth.users_file, else <data-dir>/users.json)
  --data-dir D     data dir, for the default users file (default ./data)
  --config F       properties file to read nacos.lock.auth.users_file from
`

// runUser edits the users file. There is no default user: the first
// admin is created here, explicitly.
func runUser(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nacos-lockd user", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, userUsage) }
	usersFile := fs.String("users-file", "", "")
	dataDir := fs.String("data-dir", "./data", "")
	configFile := fs.String("config", "", "")
	admin := fs.Bool("admin", false, "")
	if len(args) == 0 {
		fs.Usage()
		return errors.New("user: a command is required")
	}
	cmd := args[0]
	// Accept flags anywhere after the command.
	var positional []string
	rest := args[1:]
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		rest = fs.Args()
		if len(rest) > 0 {
			positional = append(positional, rest[0])
			rest = rest[1:]
		}
	}
	path := *usersFile
	if path == "" {
		if *configFile != "" {
			p, err := compat.LoadProperties(*configFile)
			if err != nil {
				return fmt.Errorf("read config: %w", err)
			}
			path = p.String(compat.PropAuthUsersFile, "")
		}
		if path == "" {
			path = filepath.Join(*dataDir, "users.json")
		}
	}
	store, err := auth.OpenStore(path)
	if err != nil {
		return err
	}
	need := func(n int) error {
		if len(positional) != n {
			fs.Usage()
			return fmt.Errorf("user %s: expected %d argument(s), got %d", cmd, n, len(positional))
		}
		return nil
	}
	switch cmd {
	case "add", "passwd":
		if err := need(1); err != nil {
			return err
		}
		pw, err := readPassword(stdin)
		if err != nil {
			return err
		}
		if cmd == "add" {
			err = store.Add(positional[0], pw, *admin)
		} else {
			err = store.SetPassword(positional[0], pw)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s in %s\n", map[string]string{"add": "added", "passwd": "updated"}[cmd], positional[0], path)
		return nil
	case "grant":
		if err := need(3); err != nil {
			return err
		}
		if err := store.Grant(positional[0], positional[1], positional[2]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "granted %s %s on %s\n", positional[0], positional[2], positional[1])
		return nil
	case "remove":
		if err := need(1); err != nil {
			return err
		}
		if err := store.Remove(positional[0]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %s\n", positional[0])
		return nil
	case "list":
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "USER\tADMIN\tPERMISSIONS\t")
		for _, u := range store.List() {
			var perms []string
			for _, p := range u.Permissions {
				perms = append(perms, p.Action+":"+p.Resource)
			}
			fmt.Fprintf(tw, "%s\t%t\t%s\t\n", u.Username, u.GlobalAdmin, strings.Join(perms, " "))
		}
		return tw.Flush()
	}
	fs.Usage()
	return fmt.Errorf("user: unknown command %q", cmd)
}

// readPassword takes the first line of stdin (pipe it, or type it: the
// terminal echoes, so prefer `printf '%s\n' "$PW" | nacos-lockd user add`).
func readPassword(stdin io.Reader) (string, error) {
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password: %w", err)
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return "", errors.New("no password on stdin")
	}
	return pw, nil
}
