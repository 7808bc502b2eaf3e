package auth

import (
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"
)

// Config are the Nacos auth properties.
type Config struct {
	Enabled   bool          // nacos.core.auth.enabled
	SecretKey string        // nacos.core.auth.plugin.nacos.token.secret.key (base64)
	TokenTTL  time.Duration // nacos.core.auth.plugin.nacos.token.expire.seconds, default 18000 s
}

// MinKeyBytes is the least secret key length Nacos accepts (decoded).
const MinKeyBytes = 32

// Errors callers branch on. Their texts are what clients see.
var (
	ErrBadCredentials = errors.New("unknown user or wrong password")
	ErrUnauthorized   = errors.New("user not found or token expired")
	ErrForbidden      = errors.New("authorization failed!")
)

// Authenticator issues and checks access tokens.
type Authenticator struct {
	key   []byte
	ttl   time.Duration
	store *Store
	now   func() time.Time
	dummy []byte // a bcrypt hash to compare against for unknown users
}

// New validates the configuration. With auth enabled, a missing or short
// secret key is refused rather than signing with something guessable.
func New(cfg Config, store *Store) (*Authenticator, error) {
	if cfg.TokenTTL == 0 {
		cfg.TokenTTL = 18000 * time.Second
	}
	if cfg.TokenTTL < time.Second {
		return nil, fmt.Errorf("token expire seconds must be at least 1")
	}
	key, err := base64.StdEncoding.DecodeString(cfg.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("nacos.core.auth.plugin.nacos.token.secret.key is not base64: %w", err)
	}
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("nacos.core.auth.plugin.nacos.token.secret.key decodes to %d bytes; at least %d are required", len(key), MinKeyBytes)
	}
	dummy, _ := bcrypt.GenerateFromPassword([]byte("no such user"), store.passwordCost())
	return &Authenticator{key: key, ttl: cfg.TokenTTL, store: store, now: time.Now, dummy: dummy}, nil
}

// TTL is the lifetime of issued tokens.
func (a *Authenticator) TTL() time.Duration { return a.ttl }

// Store is the users store.
func (a *Authenticator) Store() *Store { return a.store }

// Login checks a password and issues a token.
func (a *Authenticator) Login(username, password string) (string, User, error) {
	_ = a.store.Refresh()
	u, ok := a.store.Get(username)
	hash := []byte(u.PasswordHash)
	if !ok {
		hash = a.dummy // same work whether or not the user exists
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || !ok {
		return "", User{}, ErrBadCredentials
	}
	now := a.now()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": username,
		"exp": now.Add(a.ttl).Unix(),
	})
	s, err := tok.SignedString(a.key)
	if err != nil {
		return "", User{}, fmt.Errorf("sign token: %w", err)
	}
	return s, u, nil
}

// Verify checks a token and returns its (current) user: a deleted user's
// tokens stop working at once, and permission changes apply at once.
func (a *Authenticator) Verify(token string) (User, error) {
	if token == "" {
		return User{}, ErrUnauthorized
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return a.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Name}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(a.now))
	if err != nil {
		return User{}, ErrUnauthorized
	}
	sub, _ := claims.GetSubject()
	_ = a.store.Refresh()
	u, ok := a.store.Get(sub)
	if !ok {
		return User{}, ErrUnauthorized
	}
	return u, nil
}
