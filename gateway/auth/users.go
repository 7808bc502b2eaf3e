// Package auth is Nacos-compatible authentication and authorisation for
// lock operations: users with bcrypt password hashes and per-key
// permissions in a JSON file, and HS256 JWT access tokens signed with the
// Nacos property nacos.core.auth.plugin.nacos.token.secret.key.
package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// The users file (JSON, mode 0600):
//
//	{
//	  "users": [
//	    {"username": "admin", "password": "$2a$10$...", "globalAdmin": true},
//	    {"username": "billing", "password": "$2a$10$...",
//	     "permissions": [{"resource": "invoice-*", "action": "rw"}]}
//	  ]
//	}
//
// password holds a bcrypt hash, never the password. A permission's
// resource is a lock key pattern where * matches any run of characters
// (the lock type plays no part); action is r, w or rw. Every lock
// operation needs w. A global admin may do everything, including the
// admin API.

// Permission grants an action on lock keys matching Resource.
type Permission struct {
	Resource string `json:"resource"`
	Action   string `json:"action"`
}

// User is one account.
type User struct {
	Username     string       `json:"username"`
	PasswordHash string       `json:"password"`
	GlobalAdmin  bool         `json:"globalAdmin,omitempty"`
	Permissions  []Permission `json:"permissions,omitempty"`
}

// Can reports whether the user may perform action ("r" or "w") on key.
func (u User) Can(action, key string) bool {
	if u.GlobalAdmin {
		return true
	}
	for _, p := range u.Permissions {
		if strings.Contains(p.Action, action) && match(p.Resource, key) {
			return true
		}
	}
	return false
}

// match reports whether key matches pattern, where * matches any run of
// characters (including none) and everything else matches itself.
func match(pattern, key string) bool {
	// Iterative glob with backtracking to the last star: linear in
	// practice, and never exponential on hostile patterns.
	p, k := 0, 0
	star, mark := -1, 0
	for k < len(key) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, k
			p++
		case p < len(pattern) && pattern[p] == key[k]:
			p++
			k++
		case star >= 0:
			p = star + 1
			mark++
			k = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

type usersFile struct {
	Users []User `json:"users"`
}

// Errors callers branch on.
var (
	ErrUserExists  = errors.New("user already exists")
	ErrNoSuchUser  = errors.New("no such user")
	ErrBadPassword = errors.New("password must be at least 8 characters")
)

// Store is the users file, reloaded when it changes on disk so that
// `nacos-lockd user ...` takes effect on a running server.
type Store struct {
	path    string
	cost    int // bcrypt cost of the hashes it writes
	mu      sync.RWMutex
	users   map[string]User
	modTime time.Time
	size    int64
	checked atomic.Int64 // unix nanos of the last Refresh look
}

// A StoreOption changes how OpenStore sets up a store.
type StoreOption func(*Store)

// WithPasswordCost sets the bcrypt cost of the password hashes the store
// writes, and of the hash an Authenticator on it compares unknown users
// against. The default, bcrypt.DefaultCost, is what the server uses; tests
// pass bcrypt.MinCost, since the default takes seconds under the race
// detector. A cost below bcrypt.MinCost means the default.
func WithPasswordCost(cost int) StoreOption {
	return func(s *Store) {
		if cost >= bcrypt.MinCost {
			s.cost = cost
		}
	}
}

// OpenStore reads the users file; a missing file is an empty store.
func OpenStore(path string, opts ...StoreOption) (*Store, error) {
	s := &Store{path: path, cost: bcrypt.DefaultCost, users: map[string]User{}}
	for _, o := range opts {
		o(s)
	}
	if err := s.reload(true); err != nil {
		return nil, err
	}
	return s, nil
}

// Path is where the store lives.
func (s *Store) Path() string { return s.path }

// Refresh rereads the file if it changed since it was last read. It
// looks at the file at most once a second: it is called on every request.
func (s *Store) Refresh() error {
	now := time.Now().UnixNano()
	last := s.checked.Load()
	if now-last < int64(time.Second) || !s.checked.CompareAndSwap(last, now) {
		return nil
	}
	return s.reload(false)
}

func (s *Store) reload(force bool) error {
	st, err := os.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		s.mu.Lock()
		s.users, s.modTime, s.size = map[string]User{}, time.Time{}, 0
		s.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("users file: %w", err)
	}
	s.mu.RLock()
	same := st.ModTime().Equal(s.modTime) && st.Size() == s.size
	s.mu.RUnlock()
	if same && !force {
		return nil
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("users file: %w", err)
	}
	var f usersFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("users file %s: %w", s.path, err)
	}
	users := make(map[string]User, len(f.Users))
	for _, u := range f.Users {
		if u.Username == "" {
			return fmt.Errorf("users file %s: a user without a username", s.path)
		}
		if _, dup := users[u.Username]; dup {
			return fmt.Errorf("users file %s: user %q listed twice", s.path, u.Username)
		}
		for _, p := range u.Permissions {
			if p.Resource == "" || (p.Action != "r" && p.Action != "w" && p.Action != "rw") {
				return fmt.Errorf("users file %s: user %q: permission %+v needs a resource and action r, w or rw", s.path, u.Username, p)
			}
		}
		users[u.Username] = u
	}
	s.mu.Lock()
	s.users, s.modTime, s.size = users, st.ModTime(), st.Size()
	s.mu.Unlock()
	return nil
}

// Get returns a user.
func (s *Store) Get(name string) (User, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.users[name]
	return u, ok
}

// List returns the users sorted by name.
func (s *Store) List() []User {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]User, 0, len(s.users))
	for _, u := range s.users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Username < out[j].Username })
	return out
}

// Add creates a user with a new password.
func (s *Store) Add(name, password string, admin bool) error {
	return s.update(func(users map[string]User) error {
		if _, ok := users[name]; ok {
			return fmt.Errorf("%w: %s", ErrUserExists, name)
		}
		hash, err := s.hashPassword(password)
		if err != nil {
			return err
		}
		users[name] = User{Username: name, PasswordHash: hash, GlobalAdmin: admin}
		return nil
	})
}

// SetPassword replaces a user's password.
func (s *Store) SetPassword(name, password string) error {
	return s.update(func(users map[string]User) error {
		u, ok := users[name]
		if !ok {
			return fmt.Errorf("%w: %s", ErrNoSuchUser, name)
		}
		hash, err := s.hashPassword(password)
		if err != nil {
			return err
		}
		u.PasswordHash = hash
		users[name] = u
		return nil
	})
}

// Grant adds a permission.
func (s *Store) Grant(name, resource, action string) error {
	if resource == "" || (action != "r" && action != "w" && action != "rw") {
		return fmt.Errorf("permission needs a resource pattern and action r, w or rw")
	}
	return s.update(func(users map[string]User) error {
		u, ok := users[name]
		if !ok {
			return fmt.Errorf("%w: %s", ErrNoSuchUser, name)
		}
		u.Permissions = append(u.Permissions, Permission{Resource: resource, Action: action})
		users[name] = u
		return nil
	})
}

// Remove deletes a user; their tokens stop working at once.
func (s *Store) Remove(name string) error {
	return s.update(func(users map[string]User) error {
		if _, ok := users[name]; !ok {
			return fmt.Errorf("%w: %s", ErrNoSuchUser, name)
		}
		delete(users, name)
		return nil
	})
}

// hashPassword hashes a new password at the store's cost.
func (s *Store) hashPassword(password string) (string, error) {
	if len(password) < 8 {
		return "", ErrBadPassword
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), s.passwordCost())
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

// passwordCost is the bcrypt cost of new hashes; a nil store has the
// default.
func (s *Store) passwordCost() int {
	if s == nil {
		return bcrypt.DefaultCost
	}
	return s.cost
}

// update applies f to the users and writes the file atomically.
func (s *Store) update(f func(map[string]User) error) error {
	if err := s.reload(true); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	users := make(map[string]User, len(s.users))
	for k, v := range s.users {
		users[k] = v
	}
	if err := f(users); err != nil {
		return err
	}
	file := usersFile{Users: make([]User, 0, len(users))}
	for _, u := range users {
		file.Users = append(file.Users, u)
	}
	sort.Slice(file.Users, func(i, j int) bool { return file.Users[i].Username < file.Users[j].Username })
	b, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o750); err != nil {
		return fmt.Errorf("users file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".users-*")
	if err != nil {
		return fmt.Errorf("users file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write users file: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("replace users file: %w", err)
	}
	s.users = users
	if st, err := os.Stat(s.path); err == nil {
		s.modTime, s.size = st.ModTime(), st.Size()
	}
	return nil
}
